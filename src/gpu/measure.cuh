// Device-time measurement for the benchmarks (gpu_backend.h, "Measurement"): events on the
// device's stream around the same launch sequences the library runs, and the two hardware
// limits the kernels are compared with (read bandwidth, device-to-device copy).
#pragma once

#include "coli_compat.h"
#include "gpu/backend_impl.cuh"
#include "gpu/device_context.cuh"

namespace coli::gpu {

// Reads n 16-byte words; the sum is stored only if it equals a value that never occurs, so the
// loads cannot be removed.
__global__ void read_probe_kernel(const uint4 *p, size_t n, unsigned *sink) {
    unsigned acc = 0;
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += (size_t)gridDim.x * blockDim.x) {
        const uint4 v = p[k];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x9e3779b9u) *sink = acc;
}

struct EventPair {
    cudaEvent_t start = nullptr, stop = nullptr;
    ~EventPair() {
        if (start) cudaEventDestroy(start);
        if (stop) cudaEventDestroy(stop);
    }
};

// Runs body `iterations` times between two events; seconds per iteration.
template <class Body>
coli_status timed(DeviceContext &ctx, int iterations, double *seconds, std::string *why, Body body) {
    EventPair ev;
    COLI_GPU_QUERY(cudaEventCreate(&ev.start), COLI_ERR_DEVICE);
    COLI_GPU_QUERY(cudaEventCreate(&ev.stop), COLI_ERR_DEVICE);
    COLI_GPU_CHECK(body()); // warm-up (and buffer growth) outside the timed region
    COLI_GPU_QUERY(cudaStreamSynchronize(ctx.stream), COLI_ERR_DEVICE);
    COLI_GPU_QUERY(cudaEventRecord(ev.start, ctx.stream), COLI_ERR_DEVICE);
    for (int k = 0; k < iterations; ++k) COLI_GPU_CHECK(body());
    COLI_GPU_QUERY(cudaEventRecord(ev.stop, ctx.stream), COLI_ERR_DEVICE);
    COLI_GPU_QUERY(cudaEventSynchronize(ev.stop), COLI_ERR_DEVICE);
    float ms = 0;
    COLI_GPU_QUERY(cudaEventElapsedTime(&ms, ev.start, ev.stop), COLI_ERR_DEVICE);
    *seconds = ms * 1e-3 / iterations;
    return COLI_OK;
}

coli_status probe_read_bandwidth(int ordinal, size_t bytes, int iterations, double *seconds, std::string *why) {
    DeviceContext *ctx = context(ordinal);
    if (!ctx) {
        *why = "GPU " + std::to_string(ordinal) + " was not started";
        return COLI_ERR_NO_DEVICE;
    }
    std::lock_guard<std::mutex> lock(ctx->mutex);
    COLI_GPU_CHECK(select_device(ordinal, why));
    DeviceBuffer buf, sink;
    COLI_GPU_CHECK(ensure(buf, bytes, "probe buffer", why));
    COLI_GPU_CHECK(ensure(sink, sizeof(unsigned), "probe sink", why));
    COLI_GPU_OP(cudaMemsetAsync(buf.ptr, 1, bytes, ctx->stream), "probe fill");
    cudaDeviceProp prop;
    COLI_GPU_QUERY(cudaGetDeviceProperties(&prop, ordinal), COLI_ERR_DEVICE);
    const unsigned blocks = (unsigned)prop.multiProcessorCount * 8;
    return timed(*ctx, iterations, seconds, why, [&]() -> coli_status {
        COLI_GPU_LAUNCH("read_probe_kernel", read_probe_kernel<<<blocks, 512, 0, ctx->stream>>>(
                                                 buf.as<uint4>(), bytes / sizeof(uint4), sink.as<unsigned>()));
        return COLI_OK;
    });
}

coli_status probe_copy(int ordinal, size_t bytes, int iterations, double *seconds, std::string *why) {
    DeviceContext *ctx = context(ordinal);
    if (!ctx) {
        *why = "GPU " + std::to_string(ordinal) + " was not started";
        return COLI_ERR_NO_DEVICE;
    }
    std::lock_guard<std::mutex> lock(ctx->mutex);
    COLI_GPU_CHECK(select_device(ordinal, why));
    DeviceBuffer a, b;
    COLI_GPU_CHECK(ensure(a, bytes, "copy source", why));
    COLI_GPU_CHECK(ensure(b, bytes, "copy destination", why));
    return timed(*ctx, iterations, seconds, why, [&]() -> coli_status {
        COLI_GPU_OP(cudaMemcpyAsync(b.ptr, a.ptr, bytes, cudaMemcpyDeviceToDevice, ctx->stream), "copy");
        return COLI_OK;
    });
}

coli_status time_matmul_device(const DeviceTensor *t, const float *x_dev, float *y_dev, int64_t S, int numerics,
                               MatmulPath path, int iterations, double *seconds, std::string *why) {
    DeviceContext &ctx = *context(t->ordinal);
    std::lock_guard<std::mutex> lock(ctx.mutex);
    COLI_GPU_CHECK(select_device(t->ordinal, why));
    Scratch &b = ctx.scratch;
    const bool exact = numerics == COLI_NUMERICS_EXACT;
    if (exact) {
        COLI_GPU_CHECK(ensure(b.q, (size_t)(S * padded_inputs(t->L.I)), "activation codes", why));
        COLI_GPU_CHECK(ensure(b.sx, (size_t)S * sizeof(float), "activation scales", why));
    }
    return timed(ctx, iterations, seconds, why, [&]() -> coli_status {
        if (exact) COLI_GPU_CHECK(quantize_rows(ctx, x_dev, S, t->L.I, b.q.as<int8_t>(), b.sx.as<float>(), why));
        return run_matmul(ctx, *t, b.q.as<int8_t>(), b.sx.as<float>(), x_dev, y_dev, S, numerics, path, why);
    });
}

coli_status time_expert_group(const GroupCall &call, const float *x, float *y, int iterations, double *seconds,
                              std::string *why) {
    DeviceContext &ctx = *context(call.experts[0].gate->ordinal);
    std::lock_guard<std::mutex> lock(ctx.mutex);
    COLI_GPU_CHECK(select_device(ctx.ordinal, why));
    // Device time of the group with its activations on the device (as an engine keeps them):
    // quantization, experts, routing table, combine. The host transfers are the API benchmark's.
    (void)y;
    // The activations as the API stages them (group_inputs.h: a repeated row crosses once).
    Scratch &b = ctx.scratch;
    const GroupInputs in = plan_group_inputs(call.rows.data(), call.rows.size(), x, call.D);
    std::vector<float> staged((size_t)(in.staged_rows * call.D));
    gather_group_inputs(in, call.rows.data(), x, call.D, staged.data());
    const size_t nx = staged.size() * sizeof(float);
    COLI_GPU_CHECK(ensure(b.x, nx, "input buffer", why));
    COLI_GPU_CHECK(copy_in(ctx, b.x.ptr, staged.data(), nx, "copy x to device", why));
    COLI_GPU_CHECK(ensure(b.y, (size_t)(call.n_tokens * call.D) * sizeof(float), "group output", why));
    const GroupIO io{b.x.as<float>(), b.y.as<float>(), decode_group(ctx, call)};
    return timed(ctx, iterations, seconds, why, [&]() -> coli_status { return enqueue_group_on_device(ctx, b, call, in, io, why); });
}

} // namespace coli::gpu

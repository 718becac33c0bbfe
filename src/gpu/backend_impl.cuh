// Host side of the GPU backend (gpu_backend.h): devices, tensors, and the launch sequences of
// matmul, the fused expert MLP and the expert group (sync and async). Every runtime call goes
// through COLI_GPU_OP / COLI_GPU_LAUNCH (device_context.cuh).
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "coli_compat.h"
#include "gpu/device_context.cuh"
#include "gpu/device_query.cuh"
#include "gpu/gpu_backend.h"
#include "gpu/kernels_expert.cuh"
#include "gpu/kernels_matmul.cuh"
#include "gpu/kernels_tensor_core.cuh"

namespace coli::gpu {

struct DeviceTensor {
    int ordinal = 0;
    Layout L;
    DeviceBuffer weights, scales;
};

namespace {

// Activation codes are padded to whole tensor-core k-steps.
int64_t padded_inputs(int64_t I) { return (I + 31) / 32 * 32; }

coli_status select_device(int ordinal, std::string *why) {
    const cudaError_t e = cudaSetDevice(ordinal);
    if (e != cudaSuccess) {
        cudaGetLastError();
        *why = "cudaSetDevice(" + std::to_string(ordinal) + "): " + runtime_error_text(e);
        return COLI_ERR_DEVICE;
    }
    return COLI_OK;
}

// Does this device run the compiled tensor-core bodies? (Never trust the flag alone: a target
// built without them has empty kernels.)
coli_status probe_tensor_cores(DeviceContext &ctx, bool *usable, std::string *why) {
    *usable = false;
    cudaDeviceProp prop;
    COLI_GPU_OP(cudaGetDeviceProperties(&prop, ctx.ordinal), "cudaGetDeviceProperties");
    if (!COLI_NV_TENSOR_CORE_PATHS || !coli_gpu_has_nv_tensor_cores(prop)) return COLI_OK;
    DeviceBuffer flag;
    COLI_GPU_CHECK(ensure(flag, sizeof(int), "tensor-core probe buffer", why));
    COLI_GPU_OP(cudaMemsetAsync(flag.ptr, 0, sizeof(int), ctx.stream), "tensor-core probe reset");
    COLI_GPU_LAUNCH("tc_probe_kernel", tc_probe_kernel<<<1, 1, 0, ctx.stream>>>(flag.as<int>()));
    int compiled = 0;
    COLI_GPU_OP(cudaMemcpyAsync(&compiled, flag.ptr, sizeof(int), cudaMemcpyDeviceToHost, ctx.stream),
                "tensor-core probe read");
    COLI_GPU_OP(cudaStreamSynchronize(ctx.stream), "tensor-core probe sync");
    *usable = compiled == 1;
    return COLI_OK;
}

MatmulArgs args_for(const DeviceTensor &t, const int8_t *q, const float *sx, const float *x, float *y, int64_t S) {
    MatmulArgs a;
    a.w = t.weights.as<uint8_t>();
    a.scales = t.scales.ptr ? t.scales.as<float>() : nullptr;
    a.O = (int)t.L.O;
    a.I = (int)t.L.I;
    a.row_bytes = (int)t.L.row_bytes;
    a.gs = (int)(t.L.fmt == COLI_FORMAT_G4 ? t.L.gs : t.L.I);
    a.ng = (int)(t.L.groups > 0 ? t.L.groups : 1);
    a.q = q;
    a.ldq = (int)padded_inputs(t.L.I);
    a.sx = sx;
    a.x = x;
    a.y = y;
    a.S = (int)S;
    return a;
}

template <int FMT>
coli_status launch_portable(const MatmulArgs &a, bool exact, cudaStream_t stream, std::string *why) {
    const dim3 block(kBlockThreads);
    const unsigned gx = (unsigned)((a.O + kRowsPerBlock - 1) / kRowsPerBlock);
    if (a.S == 1) {
        const dim3 grid(gx, 1);
        if (exact) COLI_GPU_LAUNCH("matmul_exact_kernel", matmul_exact_kernel<FMT, 1><<<grid, block, 0, stream>>>(a));
        else COLI_GPU_LAUNCH("matmul_float_kernel", matmul_float_kernel<FMT, 1><<<grid, block, 0, stream>>>(a));
    } else if (a.S <= 4) {
        const dim3 grid(gx, 1);
        if (exact) COLI_GPU_LAUNCH("matmul_exact_kernel", matmul_exact_kernel<FMT, 4><<<grid, block, 0, stream>>>(a));
        else COLI_GPU_LAUNCH("matmul_float_kernel", matmul_float_kernel<FMT, 4><<<grid, block, 0, stream>>>(a));
    } else {
        const dim3 grid(gx, (unsigned)((a.S + 7) / 8));
        if (exact) COLI_GPU_LAUNCH("matmul_exact_kernel", matmul_exact_kernel<FMT, 8><<<grid, block, 0, stream>>>(a));
        else COLI_GPU_LAUNCH("matmul_float_kernel", matmul_float_kernel<FMT, 8><<<grid, block, 0, stream>>>(a));
    }
    return COLI_OK;
}

template <int FMT>
coli_status launch_tensor_core(const MatmulArgs &a, bool exact, cudaStream_t stream, std::string *why) {
#if COLI_NV_TENSOR_CORE_PATHS
    const dim3 block(32 * kTcWarps);
    const dim3 grid((unsigned)((a.O + 8 * kTcWarps - 1) / (8 * kTcWarps)), (unsigned)((a.S + 15) / 16));
    if (exact) COLI_GPU_LAUNCH("mma_exact_kernel", mma_exact_kernel<FMT><<<grid, block, 0, stream>>>(a));
    else COLI_GPU_LAUNCH("mma_w4a16_kernel", mma_w4a16_kernel<FMT><<<grid, block, 0, stream>>>(a));
    return COLI_OK;
#else
    (void)a;
    (void)exact;
    (void)stream;
    *why = "tensor-core kernels are not part of this build";
    return COLI_ERR_UNSUPPORTED;
#endif // COLI_NV_TENSOR_CORE_PATHS
}

// Whether a call takes the tensor cores; an explicit request that cannot be met is an error.
coli_status choose_path(const DeviceContext &ctx, const Layout &L, int64_t S, bool exact, MatmulPath requested,
                        bool *tensor_core, std::string *why) {
    const bool shape_ok = (L.fmt == COLI_FORMAT_Q4 || L.fmt == COLI_FORMAT_G4) &&
                          (!exact || L.fmt != COLI_FORMAT_G4 || L.gs % 32 == 0);
    *tensor_core = false;
    if (requested == MatmulPath::tensor_core) {
        if (!ctx.tensor_cores || !shape_ok) {
            *why = std::string("the tensor-core path is not available here (") +
                   (!ctx.tensor_cores ? "not enabled, compiled or present on this device"
                                      : "it takes Q4, or G4 with gs a multiple of 32 in exact mode") + ")";
            return COLI_ERR_UNSUPPORTED;
        }
        *tensor_core = true;
    } else if (requested == MatmulPath::automatic) {
        *tensor_core = ctx.tensor_cores && shape_ok && S >= kTcMinRows;
    }
    return COLI_OK;
}

// A kernel output buffer: grown as needed and, with COLI_GPU_POISON=1, filled with 0xff bytes
// (NaN floats, -1 codes) so that a kernel which writes nothing cannot pass on stale results.
coli_status ensure_output(DeviceContext &ctx, DeviceBuffer &b, size_t bytes, const char *what, std::string *why) {
    COLI_GPU_CHECK(ensure(b, bytes, what, why));
    if (g_poison) COLI_GPU_OP(cudaMemsetAsync(b.ptr, 0xff, bytes, ctx.stream), "poison output");
    return COLI_OK;
}

// Quantizes S rows of x_dev [S][I] into q [S][ldq] and sx [S].
coli_status quantize_rows(DeviceContext &ctx, const float *x_dev, int64_t S, int64_t I, int8_t *q, float *sx,
                          std::string *why) {
    COLI_GPU_LAUNCH("quantize_rows_kernel", quantize_rows_kernel<<<(unsigned)S, kBlockThreads, 0, ctx.stream>>>(
                                                x_dev, (int)I, q, (int)padded_inputs(I), sx));
    return COLI_OK;
}

// y_dev = W x for S rows that are already quantized (exact: q, sx) or float (x_dev).
coli_status run_matmul(DeviceContext &ctx, const DeviceTensor &t, const int8_t *q, const float *sx, const float *x_dev,
                       float *y_dev, int64_t S, int numerics, MatmulPath path, std::string *why) {
    const bool exact = numerics == COLI_NUMERICS_EXACT;
    bool tc = false;
    COLI_GPU_CHECK(choose_path(ctx, t.L, S, exact, path, &tc, why));
    const MatmulArgs a = args_for(t, q, sx, x_dev, y_dev, S);
    switch (t.L.fmt) {
    case COLI_FORMAT_F32: return launch_portable<kF32>(a, exact, ctx.stream, why);
    case COLI_FORMAT_Q8: return launch_portable<kQ8>(a, exact, ctx.stream, why);
    case COLI_FORMAT_Q2: return launch_portable<kQ2>(a, exact, ctx.stream, why);
    case COLI_FORMAT_Q4:
        return tc ? launch_tensor_core<kQ4>(a, exact, ctx.stream, why) : launch_portable<kQ4>(a, exact, ctx.stream, why);
    default:
        return tc ? launch_tensor_core<kG4>(a, exact, ctx.stream, why) : launch_portable<kG4>(a, exact, ctx.stream, why);
    }
}

coli_status copy_in(DeviceContext &ctx, void *dst, const void *src, size_t bytes, const char *what, std::string *why) {
    COLI_GPU_OP(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ctx.stream), what);
    return COLI_OK;
}

coli_status copy_out(DeviceContext &ctx, void *dst, const void *src, size_t bytes, const char *what, std::string *why) {
    COLI_GPU_OP(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, ctx.stream), what);
    return COLI_OK;
}

coli_status sync(DeviceContext &ctx, std::string *why) {
    COLI_GPU_OP(cudaStreamSynchronize(ctx.stream), "cudaStreamSynchronize");
    return COLI_OK;
}

// The fused expert MLP on rows already on the device: x_dev (and, exact, q/sx) -> y_dev.
coli_status enqueue_expert(DeviceContext &ctx, Scratch &b, const Expert &e, const float *x_dev, const int8_t *q,
                           const float *sx, float *y_dev, int64_t S, int numerics, std::string *why) {
    const int64_t F = e.gate->L.O;
    const bool exact = numerics == COLI_NUMERICS_EXACT;
    const size_t hidden = (size_t)(S * F) * sizeof(float);
    COLI_GPU_CHECK(ensure_output(ctx, b.gate, hidden, "gate buffer", why));
    COLI_GPU_CHECK(ensure_output(ctx, b.up, hidden, "up buffer", why));
    COLI_GPU_CHECK(ensure_output(ctx, b.hidden, hidden, "hidden buffer", why));
    COLI_GPU_CHECK(run_matmul(ctx, *e.gate, q, sx, x_dev, b.gate.as<float>(), S, numerics, MatmulPath::automatic, why));
    COLI_GPU_CHECK(run_matmul(ctx, *e.up, q, sx, x_dev, b.up.as<float>(), S, numerics, MatmulPath::automatic, why));
    const size_t n = (size_t)(S * F);
    COLI_GPU_LAUNCH("swiglu_kernel", swiglu_kernel<<<(unsigned)((n + 255) / 256), 256, 0, ctx.stream>>>(
                                         b.gate.as<float>(), b.up.as<float>(), b.hidden.as<float>(), n));
    const int8_t *hq = nullptr;
    const float *hsx = nullptr;
    if (exact) { // the contract re-quantizes h per row for the down projection
        COLI_GPU_CHECK(ensure_output(ctx, b.hq, (size_t)(S * padded_inputs(F)), "hidden codes", why));
        COLI_GPU_CHECK(ensure_output(ctx, b.hsx, (size_t)S * sizeof(float), "hidden scales", why));
        COLI_GPU_CHECK(quantize_rows(ctx, b.hidden.as<float>(), S, F, b.hq.as<int8_t>(), b.hsx.as<float>(), why));
        hq = b.hq.as<int8_t>();
        hsx = b.hsx.as<float>();
    }
    return run_matmul(ctx, *e.down, hq, hsx, b.hidden.as<float>(), y_dev, S, numerics, MatmulPath::automatic, why);
}

// Copies x (pinned or pageable) to the device and quantizes it when exact.
coli_status stage_input(DeviceContext &ctx, Scratch &b, const float *x, int64_t rows, int64_t D, int numerics,
                        std::string *why) {
    COLI_GPU_CHECK(ensure(b.x, (size_t)(rows * D) * sizeof(float), "input buffer", why));
    COLI_GPU_CHECK(copy_in(ctx, b.x.ptr, x, (size_t)(rows * D) * sizeof(float), "copy x to device", why));
    if (numerics == COLI_NUMERICS_EXACT) {
        COLI_GPU_CHECK(ensure_output(ctx, b.q, (size_t)(rows * padded_inputs(D)), "activation codes", why));
        COLI_GPU_CHECK(ensure_output(ctx, b.sx, (size_t)rows * sizeof(float), "activation scales", why));
        COLI_GPU_CHECK(quantize_rows(ctx, b.x.as<float>(), rows, D, b.q.as<int8_t>(), b.sx.as<float>(), why));
    }
    return COLI_OK;
}

// The whole group up to y_dev (b.y): stage x once, run each expert on its rows, combine in call
// order. With y_out the result is copied back (asynchronously) into it.
coli_status enqueue_group(DeviceContext &ctx, Scratch &b, const GroupCall &c, const float *x, float *y_out,
                          std::string *why) {
    int64_t total = 0;
    for (int64_t r : c.rows) total += r;
    const int64_t D = c.D;
    const bool exact = c.numerics == COLI_NUMERICS_EXACT;
    COLI_GPU_CHECK(stage_input(ctx, b, x, total, D, c.numerics, why));
    COLI_GPU_CHECK(ensure_output(ctx, b.out, (size_t)(std::max<int64_t>(total, 1) * D) * sizeof(float), "expert outputs", why));
    int64_t r0 = 0;
    for (size_t e = 0; e < c.experts.size(); ++e) {
        const int64_t n = c.rows[e];
        if (n == 0) continue;
        const int8_t *q = exact ? b.q.as<int8_t>() + r0 * padded_inputs(D) : nullptr;
        const float *sx = exact ? b.sx.as<float>() + r0 : nullptr;
        COLI_GPU_CHECK(enqueue_expert(ctx, b, c.experts[e], b.x.as<float>() + r0 * D, q, sx, b.out.as<float>() + r0 * D,
                                      n, c.numerics, why));
        r0 += n;
    }
    // Routing as token -> rows in increasing row order (the call order), plus the weights. The
    // host copies live in b until its next use, past the asynchronous copies.
    std::vector<int> &routing = b.host_routing;
    routing.assign((size_t)c.n_tokens + 1 + (size_t)total, 0);
    int *start = routing.data(), *rows_of = routing.data() + c.n_tokens + 1;
    for (int64_t r = 0; r < total; ++r) ++start[(c.row_token.empty() ? r : c.row_token[r]) + 1];
    for (int64_t k = 1; k <= c.n_tokens; ++k) start[k] += start[k - 1];
    std::vector<int> fill(start, start + c.n_tokens);
    for (int64_t r = 0; r < total; ++r) rows_of[fill[(size_t)(c.row_token.empty() ? r : c.row_token[r])]++] = (int)r;
    b.host_weights = c.row_weight.empty() ? std::vector<float>((size_t)total, 1.0f) : c.row_weight;
    COLI_GPU_CHECK(ensure(b.routing, routing.size() * sizeof(int), "routing buffer", why));
    COLI_GPU_CHECK(ensure(b.weights, std::max<size_t>(b.host_weights.size(), 1) * sizeof(float), "routing weights", why));
    COLI_GPU_CHECK(copy_in(ctx, b.routing.ptr, routing.data(), routing.size() * sizeof(int), "copy routing", why));
    if (!b.host_weights.empty()) {
        COLI_GPU_CHECK(copy_in(ctx, b.weights.ptr, b.host_weights.data(), b.host_weights.size() * sizeof(float),
                               "copy routing weights", why));
    }
    const size_t ny = (size_t)(c.n_tokens * D);
    COLI_GPU_CHECK(ensure_output(ctx, b.y, ny * sizeof(float), "group output", why));
    COLI_GPU_LAUNCH("combine_kernel",
                    combine_kernel<<<(unsigned)((ny + 255) / 256), 256, 0, ctx.stream>>>(
                        b.out.as<float>(), b.routing.as<int>() + c.n_tokens + 1, b.routing.as<int>(), b.weights.as<float>(),
                        b.y.as<float>(), (int)c.n_tokens, (int)D));
    if (y_out) COLI_GPU_CHECK(copy_out(ctx, y_out, b.y.ptr, ny * sizeof(float), "copy y to host", why));
    return COLI_OK;
}

} // namespace

// ---- lifecycle ---------------------------------------------------------------------------------

coli_status start(const std::vector<int> &ordinals, const Options &options, std::string *why) {
    std::map<int, std::unique_ptr<DeviceContext>> started;
    g_operations = 0;
    g_fail_after = options.fail_after;
    g_poison = options.poison_outputs;
    for (int ordinal : ordinals) {
        coli_device_info info;
        COLI_GPU_CHECK(device_info(ordinal, &info, why));
        COLI_GPU_CHECK(select_device(ordinal, why));
        auto ctx = std::make_unique<DeviceContext>();
        ctx->ordinal = ordinal;
        COLI_GPU_OP(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
        bool tc = false;
        if (options.tc_w4a16) COLI_GPU_CHECK(probe_tensor_cores(*ctx, &tc, why));
        ctx->tensor_cores = tc;
        // Documented diagnostics (docs/gpu-backends.md).
        std::fprintf(stderr, "[GPU] device %d: %s %s %.1f GiB\n", ordinal, info.name, info.arch,
                     (double)info.memory_bytes / (1024.0 * 1024.0 * 1024.0));
        if (options.tc_w4a16 && !tc) {
            std::fprintf(stderr, "[GPU] device %d: COLI_CUDA_TC_W4A16=1 ignored: no tensor-core kernels for %s in "
                                 "this build; portable kernels\n", ordinal, info.arch);
        }
        started[ordinal] = std::move(ctx);
    }
    std::lock_guard<std::mutex> lock(g_contexts_mutex);
    g_contexts = std::move(started);
    return COLI_OK;
}

void stop() {
    std::lock_guard<std::mutex> lock(g_contexts_mutex);
    for (auto &entry : g_contexts) {
        cudaSetDevice(entry.first);
        cudaStreamSynchronize(entry.second->stream);
    }
    g_contexts.clear();
    g_fail_after = -1;
    cudaGetLastError();
}

coli_status memory_info(int ordinal, uint64_t *free_bytes, uint64_t *total_bytes, std::string *why) {
    COLI_GPU_CHECK(select_device(ordinal, why));
    size_t f = 0, t = 0;
    COLI_GPU_QUERY(cudaMemGetInfo(&f, &t), COLI_ERR_DEVICE);
    *free_bytes = f;
    *total_bytes = t;
    return COLI_OK;
}

void inject_fault_after(long after) { g_fail_after = after < 0 ? -1 : g_operations.load() + after; }

bool tensor_cores_active(int ordinal) {
    DeviceContext *ctx = context(ordinal);
    return ctx && ctx->tensor_cores;
}

// ---- tensors -------------------------------------------------------------------------------------

coli_status tensor_create(int ordinal, const Layout &L, const uint8_t *weights, const float *scales, DeviceTensor **out,
                          std::string *why) {
    DeviceContext *ctx = context(ordinal);
    if (!ctx) {
        *why = "GPU " + std::to_string(ordinal) + " was not started";
        return COLI_ERR_NO_DEVICE;
    }
    std::lock_guard<std::mutex> lock(ctx->mutex);
    COLI_GPU_CHECK(select_device(ordinal, why));
    auto t = std::make_unique<DeviceTensor>();
    t->ordinal = ordinal;
    t->L = L;
    COLI_GPU_OP(cudaMalloc(&t->weights.ptr, L.weight_bytes), "cudaMalloc weights");
    t->weights.bytes = L.weight_bytes;
    if (L.has_scales()) {
        COLI_GPU_OP(cudaMalloc(&t->scales.ptr, L.scale_bytes()), "cudaMalloc scales");
        t->scales.bytes = L.scale_bytes();
    }
    COLI_GPU_CHECK(copy_in(*ctx, t->weights.ptr, weights, L.weight_bytes, "copy weights to device", why));
    if (L.has_scales()) COLI_GPU_CHECK(copy_in(*ctx, t->scales.ptr, scales, L.scale_bytes(), "copy scales to device", why));
    COLI_GPU_CHECK(sync(*ctx, why)); // the caller may free its buffers on return
    *out = t.release();
    return COLI_OK;
}

coli_status tensor_update(DeviceTensor *t, const uint8_t *weights, const float *scales, std::string *why) {
    DeviceContext *ctx = context(t->ordinal);
    std::lock_guard<std::mutex> lock(ctx->mutex);
    COLI_GPU_CHECK(select_device(t->ordinal, why));
    COLI_GPU_CHECK(copy_in(*ctx, t->weights.ptr, weights, t->L.weight_bytes, "copy weights to device", why));
    if (t->L.has_scales()) COLI_GPU_CHECK(copy_in(*ctx, t->scales.ptr, scales, t->L.scale_bytes(), "copy scales to device", why));
    return sync(*ctx, why);
}

coli_status tensor_destroy(DeviceTensor *t, std::string *why) {
    (void)why;
    DeviceContext *ctx = context(t->ordinal);
    if (ctx) {
        std::lock_guard<std::mutex> lock(ctx->mutex);
        cudaSetDevice(t->ordinal);
        cudaStreamSynchronize(ctx->stream); // no queued work may still read it
        delete t;
    } else {
        delete t;
    }
    return COLI_OK;
}

// ---- compute ---------------------------------------------------------------------------------------

coli_status matmul(const DeviceTensor *t, const float *x, float *y, int64_t S, int numerics, std::string *why) {
    DeviceContext &ctx = *context(t->ordinal);
    std::lock_guard<std::mutex> lock(ctx.mutex);
    COLI_GPU_CHECK(select_device(t->ordinal, why));
    Scratch &b = ctx.scratch;
    COLI_GPU_CHECK(stage_input(ctx, b, x, S, t->L.I, numerics, why));
    const size_t ny = (size_t)(S * t->L.O) * sizeof(float);
    COLI_GPU_CHECK(ensure_output(ctx, b.y, ny, "output buffer", why));
    COLI_GPU_CHECK(run_matmul(ctx, *t, b.q.as<int8_t>(), b.sx.as<float>(), b.x.as<float>(), b.y.as<float>(), S, numerics,
                              MatmulPath::automatic, why));
    COLI_GPU_CHECK(copy_out(ctx, y, b.y.ptr, ny, "copy y to host", why));
    return sync(ctx, why);
}

coli_status matmul_device(const DeviceTensor *t, const float *x_dev, float *y_dev, int64_t S, int numerics, MatmulPath path,
                          std::string *why) {
    DeviceContext &ctx = *context(t->ordinal);
    std::lock_guard<std::mutex> lock(ctx.mutex);
    COLI_GPU_CHECK(select_device(t->ordinal, why));
    Scratch &b = ctx.scratch;
    if (numerics == COLI_NUMERICS_EXACT) {
        COLI_GPU_CHECK(ensure_output(ctx, b.q, (size_t)(S * padded_inputs(t->L.I)), "activation codes", why));
        COLI_GPU_CHECK(ensure_output(ctx, b.sx, (size_t)S * sizeof(float), "activation scales", why));
        COLI_GPU_CHECK(quantize_rows(ctx, x_dev, S, t->L.I, b.q.as<int8_t>(), b.sx.as<float>(), why));
    }
    COLI_GPU_CHECK(run_matmul(ctx, *t, b.q.as<int8_t>(), b.sx.as<float>(), x_dev, y_dev, S, numerics, path, why));
    return sync(ctx, why);
}

coli_status expert_mlp(const Expert &e, const float *x, float *y, int64_t S, int numerics, std::string *why) {
    DeviceContext &ctx = *context(e.gate->ordinal);
    std::lock_guard<std::mutex> lock(ctx.mutex);
    COLI_GPU_CHECK(select_device(ctx.ordinal, why));
    Scratch &b = ctx.scratch;
    const int64_t D = e.gate->L.I;
    COLI_GPU_CHECK(stage_input(ctx, b, x, S, D, numerics, why));
    const size_t ny = (size_t)(S * D) * sizeof(float);
    COLI_GPU_CHECK(ensure_output(ctx, b.y, ny, "output buffer", why));
    COLI_GPU_CHECK(enqueue_expert(ctx, b, e, b.x.as<float>(), b.q.as<int8_t>(), b.sx.as<float>(), b.y.as<float>(), S,
                                  numerics, why));
    COLI_GPU_CHECK(copy_out(ctx, y, b.y.ptr, ny, "copy y to host", why));
    return sync(ctx, why);
}

coli_status expert_group(const GroupCall &call, const float *x, float *y, std::string *why) {
    DeviceContext &ctx = *context(call.experts[0].gate->ordinal);
    std::lock_guard<std::mutex> lock(ctx.mutex);
    COLI_GPU_CHECK(select_device(ctx.ordinal, why));
    COLI_GPU_CHECK(enqueue_group(ctx, ctx.scratch, call, x, y, why));
    return sync(ctx, why);
}

// ---- asynchronous expert group -----------------------------------------------------------------

struct GroupTicket {
    DeviceContext *ctx = nullptr;
    Scratch buffers; // its own: later calls may reuse the device's scratch before the take
    PinnedBuffer x_pinned, y_pinned;
    size_t y_count = 0;
};

coli_status expert_group_issue(const GroupCall &call, const float *x, GroupTicket **out, std::string *why) {
    DeviceContext &ctx = *context(call.experts[0].gate->ordinal);
    std::lock_guard<std::mutex> lock(ctx.mutex);
    COLI_GPU_CHECK(select_device(ctx.ordinal, why));
    auto ticket = std::make_unique<GroupTicket>();
    ticket->ctx = &ctx;
    int64_t total = 0;
    for (int64_t r : call.rows) total += r;
    const size_t nx = (size_t)(total * call.D), ny = (size_t)(call.n_tokens * call.D);
    COLI_GPU_CHECK(ensure(ticket->x_pinned, nx * sizeof(float), "pinned input", why));
    COLI_GPU_CHECK(ensure(ticket->y_pinned, ny * sizeof(float), "pinned output", why));
    if (nx) std::memcpy(ticket->x_pinned.ptr, x, nx * sizeof(float)); // the caller may reuse x on return
    ticket->y_count = ny;
    COLI_GPU_CHECK(enqueue_group(ctx, ticket->buffers, call, ticket->x_pinned.as<float>(), ticket->y_pinned.as<float>(), why));
    *out = ticket.release();
    return COLI_OK;
}

coli_status expert_group_take(GroupTicket *ticket, float *y, std::string *why) {
    DeviceContext &ctx = *ticket->ctx;
    {
        std::lock_guard<std::mutex> lock(ctx.mutex);
        COLI_GPU_CHECK(select_device(ctx.ordinal, why));
        COLI_GPU_CHECK(sync(ctx, why));
    }
    std::memcpy(y, ticket->y_pinned.ptr, ticket->y_count * sizeof(float));
    return COLI_OK;
}

void expert_group_discard(GroupTicket *ticket) {
    if (ticket->ctx) {
        cudaSetDevice(ticket->ctx->ordinal);
        cudaStreamSynchronize(ticket->ctx->stream);
    }
    delete ticket;
}

// ---- device buffers for tests --------------------------------------------------------------------

coli_status buffer_alloc(int ordinal, size_t bytes, void **ptr, std::string *why) {
    COLI_GPU_CHECK(select_device(ordinal, why));
    COLI_GPU_OP(cudaMalloc(ptr, bytes), "cudaMalloc test buffer");
    return COLI_OK;
}

void buffer_free(int ordinal, void *ptr) {
    cudaSetDevice(ordinal);
    cudaFree(ptr);
}

coli_status buffer_write(int ordinal, void *dst, const void *src, size_t bytes, std::string *why) {
    COLI_GPU_CHECK(select_device(ordinal, why));
    COLI_GPU_OP(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");
    return COLI_OK;
}

coli_status buffer_read(int ordinal, void *dst, const void *src, size_t bytes, std::string *why) {
    COLI_GPU_CHECK(select_device(ordinal, why));
    COLI_GPU_OP(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
    return COLI_OK;
}

coli_status launch_invalid_kernel(int ordinal, std::string *why) {
    COLI_GPU_CHECK(select_device(ordinal, why));
    // 4096 threads per block exceeds every GPU's limit (1024): a real launch error.
    COLI_GPU_LAUNCH("invalid_launch_probe_kernel", invalid_launch_probe_kernel<<<1, 4096>>>(nullptr));
    return COLI_OK;
}

} // namespace coli::gpu

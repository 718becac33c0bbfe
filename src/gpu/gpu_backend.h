// The GPU backend as the host code sees it: plain C++ declarations, implemented by backend.cu
// (compiled by nvcc or hipcc) or by stubs/gpu_none.cpp in a CPU-only build. Every function
// returns a coli_status and, on failure, the reason in *why; none of them throws.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "coli/coli.h"
#include "formats/layout.h"

namespace coli::gpu {

// "cuda", "hip" or "none".
const char *backend_name();

// Devices the runtime sees. A CPU-only build: 0 and COLI_OK. No driver or no device: 0 and
// COLI_ERR_NO_DEVICE with the runtime's reason in *why.
coli_status device_count(int *count, std::string *why);

coli_status device_info(int ordinal, coli_device_info *info, std::string *why);

// ---- Lifecycle ----------------------------------------------------------------------------

struct Options {
    long fail_after = -1;   // COLI_GPU_FAIL_AFTER: the (n+1)-th device operation fails; -1 off
    bool tc_w4a16 = false;  // COLI_CUDA_TC_W4A16: the float W4A16 tensor-core path for Q4/G4 at larger S
    bool poison_outputs = false; // COLI_GPU_POISON: fill every kernel output with NaN before use
};

// Starts the given ordinals (streams, scratch), printing one "[GPU] device N: ..." line each.
coli_status start(const std::vector<int> &ordinals, const Options &options, std::string *why);
// Frees every GPU resource the backend holds (tensors are freed by the caller first).
void stop();

// Free and total memory of a started device.
coli_status memory_info(int ordinal, uint64_t *free_bytes, uint64_t *total_bytes, std::string *why);

// Test hook: the device operation `after` operations from now fails once (COLI_GPU_FAIL_AFTER at
// run time, e.g. in the middle of a run); a negative value disarms it.
void inject_fault_after(long after);

// True when the float W4A16 tensor-core path is on for this device (compiled in, present and
// opted in with COLI_CUDA_TC_W4A16=1). The exact int8 MMA path needs no opt-in.
bool w4a16_active(int ordinal);

// ---- Tensors --------------------------------------------------------------------------------

struct DeviceTensor; // weights and scales in device memory

coli_status tensor_create(int ordinal, const Layout &L, const uint8_t *weights, const float *scales,
                          DeviceTensor **out, std::string *why);
// Copies new contents into the same device allocation.
coli_status tensor_update(DeviceTensor *t, const uint8_t *weights, const float *scales, std::string *why);
coli_status tensor_destroy(DeviceTensor *t, std::string *why);

// ---- Compute (host buffers in and out) -------------------------------------------------------

coli_status matmul(const DeviceTensor *t, const float *x, float *y, int64_t S, int numerics, std::string *why);

struct Expert {
    const DeviceTensor *gate, *up, *down;
};

coli_status expert_mlp(const Expert &e, const float *x, float *y, int64_t S, int numerics, std::string *why);

// Which matmul kernel a call takes: the device's kernel registry. automatic picks skinny for
// exact Q4 at 2..32 rows where the tensor cores are, else tensor_core where it is on and S is
// large enough (warpgroup instead, where built and present, once its 128-row tiles give every
// multiprocessor a block), else split (exact G4) or vector where the shape allows it, else portable.
enum class MatmulPath { automatic, portable, vector, split, tensor_core, skinny, warpgroup };

inline const char *matmul_path_name(MatmulPath path) {
    switch (path) {
    case MatmulPath::portable: return "portable";
    case MatmulPath::vector: return "vector";
    case MatmulPath::split: return "split";
    case MatmulPath::tensor_core: return "tensor_core";
    case MatmulPath::skinny: return "skinny";
    case MatmulPath::warpgroup: return "warpgroup";
    default: return "auto";
    }
}

// The expert group of coli_expert_group; arguments were validated by the caller.
struct GroupCall {
    std::vector<Expert> experts;
    std::vector<int64_t> rows;       // per expert
    std::vector<int64_t> row_token;  // per row (empty: row r -> token r)
    std::vector<float> row_weight;   // per row (empty: 1)
    int64_t n_tokens = 0, D = 0;
    int numerics = COLI_NUMERICS_EXACT;
    MatmulPath path = MatmulPath::automatic; // the projections' kernels (benchmarks compare them)
};

coli_status expert_group(const GroupCall &call, const float *x, float *y, std::string *why);

// Asynchronous expert group: issue enqueues everything (x is copied before it returns), take
// waits for it and writes y.
struct GroupTicket;
coli_status expert_group_issue(const GroupCall &call, const float *x, GroupTicket **out, std::string *why);
coli_status expert_group_take(GroupTicket *ticket, float *y, std::string *why);
// Releases a ticket that will not be taken (shutdown).
void expert_group_discard(GroupTicket *ticket);

// ---- Device-pointer level (tests: poisoned outputs and canary zones on the device) -----------

coli_status buffer_alloc(int ordinal, size_t bytes, void **ptr, std::string *why);
void buffer_free(int ordinal, void *ptr);
coli_status buffer_write(int ordinal, void *dst, const void *src, size_t bytes, std::string *why);
coli_status buffer_read(int ordinal, void *dst, const void *src, size_t bytes, std::string *why);

// The explicit paths a call of this shape can take on this device (never automatic): what tests,
// conformance and benchmarks iterate. Empty when the device was not started.
std::vector<MatmulPath> matmul_paths(int ordinal, const Layout &L, int numerics);

// The path an automatic call of S rows takes on this device (its choice rules: docs/gpu-backends.md);
// MatmulPath::automatic when the device was not started.
MatmulPath automatic_path(int ordinal, const Layout &L, int64_t S, int numerics);

// y_dev[S][O] = x_dev[S][I] * W^T with device buffers; the same kernels as matmul().
coli_status matmul_device(const DeviceTensor *t, const float *x_dev, float *y_dev, int64_t S, int numerics,
                          MatmulPath path, std::string *why);

// ---- Measurement (bench/bench_gpu.cpp): device time from events on the device's stream ------

// Seconds per pass of a kernel that reads `bytes` of device memory with 16-byte loads.
coli_status probe_read_bandwidth(int ordinal, size_t bytes, int iterations, double *seconds, std::string *why);
// Seconds per device-to-device copy of `bytes`.
coli_status probe_copy(int ordinal, size_t bytes, int iterations, double *seconds, std::string *why);
// Seconds per matmul_device call (activation quantization included in exact mode).
coli_status time_matmul_device(const DeviceTensor *t, const float *x_dev, float *y_dev, int64_t S, int numerics,
                               MatmulPath path, int iterations, double *seconds, std::string *why);
// The expert group as expert_group() runs it once its activations are on the device, timed on
// the device: activation quantization, experts, routing table copy and combine (x is copied to
// the device once, before timing; y is not written).
coli_status time_expert_group(const GroupCall &call, const float *x, float *y, int iterations, double *seconds,
                              std::string *why);

// A deliberately invalid kernel launch (too many threads per block), to prove launch errors are
// reported and do not poison later calls.
coli_status launch_invalid_kernel(int ordinal, std::string *why);

// Evaluates the shared numerics header (src/numerics/exact_math.h) and the compat dot product on
// the device, for n inputs, so tests can compare the bits with the host:
//   exp_out[k] = coli_expf(x[k]), silu_out[k] = coli_silu(x[k]),
//   codes[k] = coli_quantize_row(x, n, ...)[k] with *sx its scale,
//   dot_out[k] = coli_dot4_i8(a[k], b[k], c[k]).
struct NumericsProbe {
    int n = 0;
    const float *x = nullptr;
    const int *a = nullptr, *b = nullptr, *c = nullptr;
    float *exp_out = nullptr, *silu_out = nullptr, *sx = nullptr;
    int8_t *codes = nullptr;
    int *dot_out = nullptr;
};
coli_status run_numerics_probe(int ordinal, const NumericsProbe &p, std::string *why);

} // namespace coli::gpu

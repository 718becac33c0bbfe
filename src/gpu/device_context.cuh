// Per-device state (stream, scratch buffers, lock) and the one gate every device operation
// passes through: it counts operations for fault injection (COLI_GPU_FAIL_AFTER), turns runtime
// errors into statuses, and clears non-sticky errors so that the next call starts clean.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "coli_compat.h"
#include "gpu/gpu_backend.h"

namespace coli::gpu {

// ---- fault injection and error mapping ------------------------------------------------------

inline std::atomic<long> g_fail_after{-1}; // operations left before the injected failure; -1: off
inline std::atomic<long> g_operations{0};  // device operations since start()
inline std::atomic<bool> g_poison{false};  // COLI_GPU_POISON: fill kernel outputs with NaN first

// Called before every device operation; false (with *why) when this one is the injected fault.
inline bool fault_check(const char *what, std::string *why) {
    const long n = g_operations.fetch_add(1);
    long armed = g_fail_after.load();
    if (armed >= 0 && n >= armed && g_fail_after.compare_exchange_strong(armed, -1)) {
        *why = std::string("injected fault (COLI_GPU_FAIL_AFTER) at device operation #") + std::to_string(n + 1) +
               ": " + what;
        return false;
    }
    return true;
}

inline coli_status status_of(cudaError_t e) {
    return e == cudaErrorMemoryAllocation ? COLI_ERR_OUT_OF_MEMORY : COLI_ERR_DEVICE;
}

inline std::string runtime_error_text(cudaError_t e) {
    return std::string(COLI_GPU_RUNTIME_NAME " error ") + std::to_string(static_cast<int>(e)) + " (" +
           cudaGetErrorName(e) + "): " + cudaGetErrorString(e);
}

// One device operation: injected fault, or the runtime's result. Clears the runtime's last error.
#define COLI_GPU_OP(expr, what)                                                                    \
    do {                                                                                           \
        if (!fault_check(what, why)) return COLI_ERR_DEVICE;                                       \
        const cudaError_t coli_err_ = (expr);                                                      \
        if (coli_err_ != cudaSuccess) {                                                            \
            cudaGetLastError();                                                                    \
            *why = std::string(what) + ": " + runtime_error_text(coli_err_);                       \
            return status_of(coli_err_);                                                           \
        }                                                                                          \
    } while (0)

// A kernel launch as one device operation; launch errors are read back at once.
#define COLI_GPU_LAUNCH(what, ...)                                                                 \
    do {                                                                                           \
        if (!fault_check(what, why)) return COLI_ERR_DEVICE;                                       \
        __VA_ARGS__;                                                                               \
        const cudaError_t coli_err_ = cudaGetLastError();                                          \
        if (coli_err_ != cudaSuccess) {                                                            \
            *why = std::string("kernel launch ") + what + ": " + runtime_error_text(coli_err_);    \
            return COLI_ERR_DEVICE;                                                                \
        }                                                                                          \
    } while (0)

// A launch through coli_launch_overlapped (compat): the kernel must follow its contract (it waits
// for the kernel before it). KERNEL is parenthesized when it names template arguments.
#define COLI_GPU_LAUNCH_OVERLAPPED(ctx, what, kernel, grid, block, smem, ...)                       \
    do {                                                                                           \
        if (!fault_check(what, why)) return COLI_ERR_DEVICE;                                       \
        const cudaError_t coli_err_ =                                                              \
            coli_launch_overlapped((ctx).overlap, kernel, grid, block, smem, (ctx).stream, __VA_ARGS__); \
        const cudaError_t coli_last_ = cudaGetLastError();                                         \
        if (coli_err_ != cudaSuccess || coli_last_ != cudaSuccess) {                               \
            *why = std::string("kernel launch ") + what + ": " +                                   \
                   runtime_error_text(coli_err_ != cudaSuccess ? coli_err_ : coli_last_);          \
            return COLI_ERR_DEVICE;                                                                \
        }                                                                                          \
    } while (0)

#define COLI_GPU_CHECK(call)                                                                       \
    do {                                                                                           \
        const coli_status coli_st_ = (call);                                                       \
        if (coli_st_ != COLI_OK) return coli_st_;                                                  \
    } while (0)

// ---- device memory ----------------------------------------------------------------------------

// Device or pinned host memory owned by RAII; freeing is not counted as an operation (it must
// not fail).
template <class Release> struct OwnedBuffer {
    void *ptr = nullptr;
    size_t bytes = 0;
    OwnedBuffer() = default;
    OwnedBuffer(const OwnedBuffer &) = delete;
    OwnedBuffer &operator=(const OwnedBuffer &) = delete;
    ~OwnedBuffer() { release(); }
    void release() {
        if (ptr) Release()(ptr);
        ptr = nullptr;
        bytes = 0;
    }
    template <class T> T *as() const { return static_cast<T *>(ptr); }
};

struct DeviceRelease {
    void operator()(void *p) const { cudaFree(p); }
};
struct PinnedRelease {
    void operator()(void *p) const { cudaFreeHost(p); }
};
using DeviceBuffer = OwnedBuffer<DeviceRelease>;
using PinnedBuffer = OwnedBuffer<PinnedRelease>; // for asynchronous copies

// Allocation of each kind of buffer, as one device operation.
inline cudaError_t allocate(DeviceBuffer &b, size_t bytes) { return cudaMalloc(&b.ptr, bytes); }
inline cudaError_t allocate(PinnedBuffer &b, size_t bytes) { return cudaMallocHost(&b.ptr, bytes); }

// Makes b hold at least bytes (grow-only scratch).
template <class Buffer> coli_status ensure(Buffer &b, size_t bytes, const char *what, std::string *why) {
    if (b.bytes >= bytes && b.ptr) return COLI_OK;
    b.release();
    COLI_GPU_OP(allocate(b, bytes ? bytes : 1), what);
    b.bytes = bytes;
    return COLI_OK;
}

// ---- per-device context ---------------------------------------------------------------------

struct Scratch {
    DeviceBuffer x, q, sx, gate, up, hidden, hq, hsx, out, y, routing;
    // Pinned staging for the synchronous calls' activations and results, and the routing table
    // (sources of asynchronous copies: kept until the next use of this scratch).
    PinnedBuffer x_host, y_host, routing_host;
};

struct DeviceContext {
    int ordinal = 0;
    cudaStream_t stream = nullptr;
    bool tensor_cores = false; // compiled in and present on the device (int8 MMA for exact mode)
    bool warpgroup_mma = false; // sm_90a code (wgmma) compiled in and a compute-capability 9.0 device
    bool w4a16 = false;        // and the float W4A16 path opted in (COLI_CUDA_TC_W4A16=1)
    int multiprocessors = 1;   // sizes the balanced kernels' grids (one wave)
    bool overlap = false;      // overlapped launches (coli_launch_overlapped) are honoured
    std::map<const void *, int> resident_blocks; // per kernel: blocks the whole device holds at once
    std::mutex mutex;          // one compute call at a time on this device's scratch and stream
    Scratch scratch;
    ~DeviceContext() {
        if (stream) cudaStreamDestroy(stream);
    }
};

inline std::mutex g_contexts_mutex;
inline std::map<int, std::unique_ptr<DeviceContext>> g_contexts;

inline DeviceContext *context(int ordinal) {
    std::lock_guard<std::mutex> lock(g_contexts_mutex);
    auto it = g_contexts.find(ordinal);
    return it == g_contexts.end() ? nullptr : it->second.get();
}

} // namespace coli::gpu

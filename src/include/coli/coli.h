/* coli.h — the public C ABI of colibri-gpu, the expert backend of a Mixture-of-Experts engine.
 *
 * Conventions (all functions):
 * - Every function returns a coli_status; COLI_OK is 0, errors are negative. On error,
 *   coli_last_error() names the argument or condition, and no tensor, counter or output buffer
 *   has been changed.
 * - Nothing aborts, exits or prints (except the documented diagnostics lines).
 * - Thread-safety: every function may be called from any thread. Compute calls run concurrently
 *   with each other; upload/update/free/init/shutdown serialise against them.
 * - Matrices: y[s][o] = sum_i x[s][i] * w[o][i]; x is float32 [S][I], y float32 [S][O], W is
 *   stored row-major [O][I] in one of the weight formats below (docs/formats.md).
 * - Numerics: docs/numerics.md specifies both modes; exact mode is reproduced bit for bit by
 *   every backend.
 */
#ifndef COLI_COLI_H
#define COLI_COLI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#if defined(COLI_BUILDING_LIBRARY)
#define COLI_API __declspec(dllexport)
#else
#define COLI_API
#endif
#else
#define COLI_API __attribute__((visibility("default")))
#endif /* _WIN32 */

/* Bumped on any incompatible change of the functions or structs below. */
#define COLI_ABI_VERSION 1

typedef enum coli_status {
    COLI_OK = 0,
    COLI_ERR_INVALID_ARGUMENT = -1, /* null pointer, bad code, bad size, wrong state */
    COLI_ERR_UNSUPPORTED = -2,      /* valid request this build or device cannot do */
    COLI_ERR_NO_DEVICE = -3,        /* device missing, invalid ordinal, no GPU backend/runtime */
    COLI_ERR_OUT_OF_MEMORY = -4,    /* an allocation failed (host or device) */
    COLI_ERR_DEVICE = -5,           /* the GPU runtime reported an error */
    COLI_ERR_IO = -6,               /* a file could not be read or is malformed */
    COLI_ERR_INTERNAL = -7          /* a bug: please report it with coli_last_error() */
} coli_status;

/* Weight formats. The codes are part of the ABI: they match the engine's on-disk snapshots. */
typedef enum coli_format {
    COLI_FORMAT_F32 = 0, /* float32, no scales */
    COLI_FORMAT_Q8 = 1,  /* int8, one float32 scale per row: w = q * scale[o] */
    COLI_FORMAT_Q4 = 2,  /* 4-bit, element 2j in the low nibble, 2j+1 in the high nibble,
                            value = nibble - 8 (-8..7), row stride ceil(I/2) bytes, scale per row */
    COLI_FORMAT_Q2 = 3,  /* 2-bit, element 4j+k in bits 2k..2k+1, value = field - 2 (-2..1),
                            row stride ceil(I/4) bytes, scale per row */
    COLI_FORMAT_G4 = 4   /* Q4 packing, one scale per group of gs inputs: scale[o*ng + i/gs],
                            ng = ceil(I/gs); the last group may be partial; gs % 8 == 0 */
} coli_format;

typedef enum coli_numerics {
    COLI_NUMERICS_FLOAT = 0, /* float32 activations x dequantized weights, float32 accumulation */
    COLI_NUMERICS_EXACT = 1  /* int8 activations, int32 dot products (not for F32 tensors) */
} coli_numerics;

#define COLI_DEVICE_CPU (-1) /* the CPU reference backend, always present */
#define COLI_DEVICE_ALL (-2) /* aggregate over every device, for coli_stats_get */

typedef struct coli_tensor_t *coli_tensor;

/* Human-readable name of a status ("COLI_ERR_NO_DEVICE"); never NULL. */
COLI_API const char *coli_status_name(coli_status status);

/* Message of the last failed call on this thread ("" if none); valid until the next call. */
COLI_API const char *coli_last_error(void);

/* ABI version the library was built with (COLI_ABI_VERSION) and its version string. */
COLI_API int coli_abi_version(void);
COLI_API const char *coli_version(void);

/* GPU backend compiled into this library: "none", "cuda" or "hip". */
COLI_API const char *coli_gpu_backend(void);

/* ---- Weight formats --------------------------------------------------------------------- */

/* Sizes of a matrix [O][I] in format fmt: weight bytes and number of float32 scales. gs is the
 * group size for G4 (a positive multiple of 8) and must be 0 for every other format. */
COLI_API coli_status coli_format_sizes(int fmt, int64_t O, int64_t I, int64_t gs,
                                       size_t *weight_bytes, size_t *scale_count);

/* Quantize a float32 matrix w [O][I] into fmt: round to nearest (ties to even), absmax scales.
 * Q8: scale = amax/127. Q4, G4 and Q2 use the signed extreme: scale = m / -8 (Q4, G4) or
 * m / -2 (Q2), where m is the element of largest magnitude of the row (group), so that m maps
 * onto the most negative code exactly; an all-zero row (group) gets scale 0. Codes are clamped
 * to the format's range. For F32 the weights are copied and scales may be NULL. */
COLI_API coli_status coli_quantize(int fmt, int64_t O, int64_t I, int64_t gs, const float *w,
                                   void *weights, float *scales);

/* Expand weights in fmt back into float32 w [O][I]: w = value * scale (one rounding). */
COLI_API coli_status coli_dequantize(int fmt, int64_t O, int64_t I, int64_t gs,
                                     const void *weights, const float *scales, float *w);

/* ---- Devices and lifecycle -------------------------------------------------------------- */

/* Start the library on the given devices (COLI_DEVICE_CPU and/or GPU ordinals). With devices
 * NULL and count 0 the environment decides: the CPU, plus the GPUs of COLI_GPUS=0,1,... or
 * COLI_GPU=N (default 0) when COLI_CUDA=1 (the same variables on NVIDIA and AMD). Fails on a
 * second call without coli_shutdown, on duplicates, on a malformed variable, on a GPU in a
 * CPU-only build, a missing driver or an ordinal that does not exist: it never falls back
 * silently. Prints one line "[GPU] device N: <name> <arch> <memory>" per GPU started, to stderr
 * (docs/gpu-backends.md lists every diagnostics line). */
COLI_API coli_status coli_init(const int *devices, int count);

/* Free every tensor and return to the uninitialised state. Calling it again is harmless. */
COLI_API coli_status coli_shutdown(void);

/* Number of GPUs the runtime of this build can see. CPU-only build: 0 and COLI_OK. A GPU build
 * whose runtime finds no device or no driver: 0 and COLI_ERR_NO_DEVICE with the reason. */
COLI_API coli_status coli_gpu_count(int *count);

typedef struct coli_device_info {
    int device;             /* COLI_DEVICE_CPU or the GPU ordinal */
    char vendor[16];        /* "CPU", "NVIDIA" or "AMD" */
    char name[128];         /* CPU model or GPU product name */
    char arch[32];          /* "x86_64", "sm_90", "gfx90a" */
    uint64_t memory_bytes;  /* physical RAM, or the GPU's global memory */
    int warp_size;          /* 0 for the CPU, 32 or 64 for GPUs */
    int has_tensor_cores;   /* 1 when the compile-gated NVIDIA tensor-core paths can run */
    char runtime[64];       /* "CUDA runtime 13000, driver 13000" or "" for the CPU */
    int multiprocessors;    /* SMs / CUs of a GPU; hardware threads of the CPU */
} coli_device_info;

/* Describe a device: COLI_DEVICE_CPU or a GPU ordinal < coli_gpu_count(). Needs no coli_init. */
COLI_API coli_status coli_device_info_get(int device, coli_device_info *info);

/* ---- Tensors ---------------------------------------------------------------------------- */

/* Copy a weight matrix onto a device. weights: coli_format_sizes() bytes; scales: scale_count
 * floats (NULL for F32). The library keeps its own copy: the caller may free both buffers right
 * after the call. The device must be one that coli_init started. */
COLI_API coli_status coli_tensor_upload(coli_tensor *out, int fmt, int64_t O, int64_t I,
                                        int64_t gs, const void *weights, const float *scales,
                                        int device);

/* Replace the contents of a tensor in place (same format and shape, no reallocation). */
COLI_API coli_status coli_tensor_update(coli_tensor t, const void *weights, const float *scales);

/* Free a tensor. Freeing one twice, or a handle that never came from upload, is an error. */
COLI_API coli_status coli_tensor_free(coli_tensor t);

typedef struct coli_tensor_desc {
    int format;
    int64_t O, I, gs;
    int device;
    uint64_t bytes; /* weights + scales held for this tensor */
} coli_tensor_desc;

COLI_API coli_status coli_tensor_describe(coli_tensor t, coli_tensor_desc *desc);

/* ---- Compute ---------------------------------------------------------------------------- */

/* y[S][O] = x[S][I] * W^T in the given numerics mode. */
COLI_API coli_status coli_matmul(coli_tensor t, float *y, const float *x, int64_t S,
                                 int numerics);

/* One routed expert: gate and up are [F][D], down is [D][F] (F: expert intermediate size). */
typedef struct coli_expert {
    coli_tensor gate;
    coli_tensor up;
    coli_tensor down;
} coli_expert;

/* Fused expert MLP: y[S][D] = down( silu(gate(x)) * up(x) ), x is [S][D].
 * silu(g) = g / (1 + exp(-g)) with the library's own exp (docs/numerics.md). */
COLI_API coli_status coli_expert_mlp(const coli_expert *expert, float *y, const float *x,
                                     int64_t S, int numerics);

/* Expert group: n_experts experts of one layer in one call. Expert e takes the next
 * rows[e] consecutive rows of x [sum(rows)][D]. Row r's output, times row_weight[r] (1 when
 * row_weight is NULL), is added to y[row_token[r]] (row r itself when row_token is NULL, and
 * then n_tokens must equal sum(rows)). y [n_tokens][D] is overwritten: it starts at +0 and the
 * products are added in call order, expert by expert, row by row, each product rounded and
 * then added. rows[e] may be 0. */
COLI_API coli_status coli_expert_group(const coli_expert *experts, int n_experts,
                                       const int64_t *rows, const float *x,
                                       const int64_t *row_token, const float *row_weight,
                                       float *y, int64_t n_tokens, int numerics);

/* Asynchronous expert group: issue validates and enqueues the same computation as
 * coli_expert_group and returns at once (x is copied before it returns), so the calling thread
 * can compute other experts on the CPU meanwhile; take waits for the result, writes y
 * [n_tokens][D] and releases the ticket. Results are bit-identical to coli_expert_group. While a
 * ticket is outstanding, its tensors cannot be updated or freed. */
typedef struct coli_group_ticket_t *coli_group_ticket;

COLI_API coli_status coli_expert_group_issue(const coli_expert *experts, int n_experts, const int64_t *rows,
                                             const float *x, const int64_t *row_token, const float *row_weight,
                                             int64_t n_tokens, int numerics, coli_group_ticket *ticket);
COLI_API coli_status coli_expert_group_take(coli_group_ticket ticket, float *y);

/* ---- Expert tier (docs/expert-tier.md) -------------------------------------------------------
 * Routed experts are read from a safetensors weight store; the hottest are promoted into a
 * persistent VRAM tier on the GPUs that coli_init started, the rest run on the CPU. Placement is
 * decided and uploaded when the tier opens, from CUDA_EXPERT_GB, CUDA_RESERVE_GB, PIN, PIN_FILL,
 * CUDA_RELEASE_HOST and CUDA_DENSE (docs/configuration.md), and explained on stderr. */
typedef struct coli_tier_t *coli_tier;

typedef struct coli_tier_info {
    int layers, experts;       /* routed experts per layer */
    int64_t hidden, intermediate;
    int format;
    int gpu_devices;           /* GPUs the tier may use */
    uint64_t gpu_experts;      /* routed experts resident on GPUs */
    uint64_t gpu_tensors;      /* tensors resident on GPUs (experts and dense) */
    uint64_t gpu_bytes;
    uint64_t fallbacks;        /* experts that fell back to the CPU (upload or run-time failure) */
    uint64_t rematerialised;   /* experts re-read from the store after their host copy was released */
    int gpu_failed;            /* 1 after a GPU failure moved everything to the CPU */
    uint64_t budget_requested; /* CUDA_EXPERT_GB in bytes (the clamp total for auto), 0 if unset */
    uint64_t budget_effective; /* after the per-device clamp */
} coli_tier_info;

/* Writes a store of random weights (deterministic for a seed), for tests and demos. */
COLI_API coli_status coli_store_write_random(const char *path, int layers, int experts, int64_t hidden,
                                             int64_t intermediate, int format, int64_t group_size, uint64_t seed);

COLI_API coli_status coli_tier_open(const char *store_path, coli_tier *tier);

/* One MoE layer's routed experts, with the semantics of coli_expert_group: experts[e] is an
 * expert index of that layer and takes the next rows[e] rows of x. Each expert runs where the tier
 * placed it; the combination is the same, so exact results do not depend on the placement. */
COLI_API coli_status coli_tier_forward(coli_tier tier, int layer, const int *experts, int n_experts,
                                       const int64_t *rows, const float *x, const int64_t *row_token,
                                       const float *row_weight, float *y, int64_t n_tokens, int numerics);

/* The layer's shared expert (dense; resident on GPU 0 with CUDA_DENSE=1): y[S][D]. */
COLI_API coli_status coli_tier_shared_expert(coli_tier tier, int layer, float *y, const float *x, int64_t S,
                                             int numerics);

/* Where an expert runs: a GPU ordinal or COLI_DEVICE_CPU. */
COLI_API coli_status coli_tier_expert_device(coli_tier tier, int layer, int expert, int *device);
COLI_API coli_status coli_tier_info_get(coli_tier tier, coli_tier_info *info);

/* Writes the routing counts recorded by coli_tier_forward as a pin profile (PIN=<file>). */
COLI_API coli_status coli_tier_profile_write(coli_tier tier, const char *path);

/* Frees the tier's tensors; prints the final fallback count line. */
COLI_API coli_status coli_tier_close(coli_tier tier);

/* ---- Statistics ------------------------------------------------------------------------- */

typedef struct coli_stats {
    uint64_t tensors; /* live tensors */
    uint64_t bytes;   /* weights + scales held */
} coli_stats;

/* Resident set of one device (COLI_DEVICE_CPU, a GPU ordinal) or COLI_DEVICE_ALL. Counters go
 * back to zero when every tensor is freed. */
COLI_API coli_status coli_stats_get(int device, coli_stats *stats);

#ifdef __cplusplus
}
#endif

#endif /* COLI_COLI_H */

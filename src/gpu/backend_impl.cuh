// Host side of the GPU backend (gpu_backend.h): devices, tensors, and the launch sequences of
// matmul, the fused expert MLP and the expert group (sync and async). Every runtime call goes
// through COLI_GPU_OP / COLI_GPU_LAUNCH (device_context.cuh).
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <vector>

#include "coli_compat.h"
#include "gpu/device_context.cuh"
#include "gpu/device_query.cuh"
#include "gpu/gpu_backend.h"
#include "gpu/group_inputs.h"
#include "gpu/kernels_expert.cuh"
#include "gpu/kernels_matmul.cuh"
#include "gpu/kernels_matvec.cuh"
#include "gpu/kernels_matvec_expert.cuh"
#include "gpu/kernels_matvec_split.cuh"
#include "gpu/kernels_tensor_core.cuh"
#include "gpu/kernels_tensor_core_skinny.cuh"
#include "gpu/kernels_tensor_core_wgmma.cuh"

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

// Runs a probe kernel (one thread writes 1 where its target has the probed bodies compiled in)
// and reads its answer.
coli_status run_probe(DeviceContext &ctx, void (*probe)(int *), const char *name, bool *compiled, std::string *why) {
    const std::string buffer = std::string(name) + " buffer", reset = std::string(name) + " reset",
                      read = std::string(name) + " read", sync = std::string(name) + " sync";
    DeviceBuffer flag;
    COLI_GPU_CHECK(ensure(flag, sizeof(int), buffer.c_str(), why));
    COLI_GPU_OP(cudaMemsetAsync(flag.ptr, 0, sizeof(int), ctx.stream), reset.c_str());
    COLI_GPU_LAUNCH(name, probe<<<1, 1, 0, ctx.stream>>>(flag.as<int>()));
    int value = 0;
    COLI_GPU_OP(cudaMemcpyAsync(&value, flag.ptr, sizeof(int), cudaMemcpyDeviceToHost, ctx.stream), read.c_str());
    COLI_GPU_OP(cudaStreamSynchronize(ctx.stream), sync.c_str());
    *compiled = value == 1;
    return COLI_OK;
}

#if COLI_NV_TENSOR_CORE_PATHS
// The tiled kernels' shared memory, and the skinny G4 ones' at most, exceed the default 48 KB;
// each device is told once.
coli_status allow_tile_smem(std::string *why) {
    const auto allow = [](auto kernel, int bytes) { return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes); };
    COLI_GPU_OP(allow(mma_exact_tiled_kernel<kQ4, 64>, tile_smem_bytes<64>()), "tiled kernel shared memory");
    COLI_GPU_OP(allow(mma_exact_tiled_kernel<kQ4, 128>, tile_smem_bytes<128>()), "tiled kernel shared memory");
    COLI_GPU_OP(allow(mma_exact_tiled_kernel<kG4, 64>, tile_smem_bytes<64>()), "tiled kernel shared memory");
    COLI_GPU_OP(allow(mma_exact_tiled_kernel<kG4, 128>, tile_smem_bytes<128>()), "tiled kernel shared memory");
    COLI_GPU_OP(allow(mma_skinny_kernel<kG4, 1>, skinny_group_smem_bytes(kSkinnyMaxGroups, 1)), "skinny kernel shared memory");
    COLI_GPU_OP(allow(mma_skinny_kernel<kG4, 2>, skinny_group_smem_bytes(kSkinnyMaxGroups, 2)), "skinny kernel shared memory");
    return COLI_OK;
}

// Whether the build holds the wgmma body for this device (sm_90a code; compute capability 9.0).
coli_status probe_wgmma(DeviceContext &ctx, const cudaDeviceProp &prop, std::string *why) {
    ctx.warpgroup_mma = false;
    if (!coli_gpu_has_nv_wgmma(prop)) return COLI_OK;
    bool compiled = false;
    COLI_GPU_CHECK(run_probe(ctx, wgmma_probe_kernel, "wgmma_probe_kernel", &compiled, why));
    if (!compiled) return COLI_OK;
    const auto allow = [](auto kernel, int bytes) { return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes); };
    COLI_GPU_OP(allow(wgmma_exact_kernel<kQ4, 128, false>, wg_smem_bytes<kQ4, 128>()), "wgmma kernel shared memory");
    COLI_GPU_OP(allow(wgmma_exact_kernel<kG4, 128, false>, wg_smem_bytes<kG4, 128>()), "wgmma kernel shared memory");
    COLI_GPU_OP(allow(wgmma_exact_kernel<kG4, 128, true>, wg_smem_bytes<kG4, 128, true>()), "wgmma kernel shared memory");
    COLI_GPU_OP(allow(wgmma_exact_kernel<kG4, 64, false>, wg_smem_bytes<kG4, 64>()), "wgmma kernel shared memory");
    ctx.warpgroup_mma = true;
    return COLI_OK;
}
#endif // COLI_NV_TENSOR_CORE_PATHS

// Does this device run the compiled tensor-core bodies? (Never trust the flag alone: a target
// built without them has empty kernels.)
coli_status probe_tensor_cores(DeviceContext &ctx, bool *usable, std::string *why) {
    *usable = false;
    cudaDeviceProp prop;
    COLI_GPU_OP(cudaGetDeviceProperties(&prop, ctx.ordinal), "cudaGetDeviceProperties");
    ctx.multiprocessors = prop.multiProcessorCount > 0 ? prop.multiProcessorCount : 1;
    ctx.overlap = coli_gpu_overlaps_launches(prop);
    if (!COLI_NV_TENSOR_CORE_PATHS || !coli_gpu_has_nv_tensor_cores(prop)) return COLI_OK;
    COLI_GPU_CHECK(run_probe(ctx, tc_probe_kernel, "tc_probe_kernel", usable, why));
#if COLI_NV_TENSOR_CORE_PATHS
    if (*usable) COLI_GPU_CHECK(allow_tile_smem(why));
    if (*usable) COLI_GPU_CHECK(probe_wgmma(ctx, prop, why));
#endif // COLI_NV_TENSOR_CORE_PATHS
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

bool tensor_core_shape(const Layout &L, bool exact) {
    return (L.fmt == COLI_FORMAT_Q4 || L.fmt == COLI_FORMAT_G4) && (!exact || L.fmt != COLI_FORMAT_G4 || L.gs % 32 == 0);
}

// The tensor cores on this device for this mode: int8 MMA (exact, bit-identical) whenever they
// exist; W4A16 (float, its own accuracy bound) only when opted in.
bool tensor_cores_for(const DeviceContext &ctx, bool exact) { return ctx.tensor_cores && (exact || ctx.w4a16); }

// Exact tensor-core calls batch into the tiled kernel when whole 16-byte pieces tile the rows.
bool tiled_shape(const Layout &L, bool exact) { return exact && L.row_bytes % 16 == 0 && L.I <= kTileMaxInputs; }

// The wgmma kernel takes the tiled shapes of exact Q4, and of G4 with groups that end on its
// 32-code wgmma steps (as tensor_core_shape) and hold at most kWgMaxGroupCodes codes.
bool wgmma_shape(const Layout &L, bool exact) {
    const bool g4 = L.fmt == COLI_FORMAT_G4 && L.gs % 32 == 0 && L.gs <= kWgMaxGroupCodes;
    return tiled_shape(L, exact) && (L.fmt == COLI_FORMAT_Q4 || g4);
}

// The exponent of the smallest power of two >= v (log2 v for a power of two): split's unit shift.
int ceil_log2(int64_t v) {
    int k = 0;
    while (((int64_t)1 << k) < v) ++k;
    return k;
}

// Exact G4 on the vector-load kernels: a scale group spans gs / piece lanes, a power of two up to
// 32, so its sum is finished by shuffles within those lanes.
bool g4_group_lanes_ok(int64_t gs, int64_t piece) {
    const int64_t lanes = gs / piece;
    return gs % piece == 0 && lanes <= kRowLanes && (lanes & (lanes - 1)) == 0;
}

// Whether the vector kernels (kernels_matvec.cuh) take this layout in this mode with pieces of
// `piece` codes: whole pieces of weight bytes per row, activations read only within the row (exact:
// within the zero-padded codes), a G4 scale group of whole pieces.
bool vector_piece_fits(const Layout &L, bool exact, int64_t piece) {
    const int64_t wb = piece / vec_codes_per_byte(L.fmt);
    if (L.row_bytes % wb != 0) return false;
    if (exact ? (int64_t)(L.row_bytes / wb) * piece > padded_inputs(L.I) : L.I % piece != 0) return false;
    if (L.fmt != COLI_FORMAT_G4) return true;
    if ((uint64_t)padded_inputs(L.I) * (uint64_t)L.gs >= (1ull << 32)) return false; // scale_group's range
    return exact ? g4_group_lanes_ok(L.gs, piece) : L.gs % piece == 0;
}

bool vector_shape(const Layout &L, bool exact) {
    return L.fmt != COLI_FORMAT_F32 && vector_piece_fits(L, exact, vec_narrow_piece(exact));
}

// Wide pieces (one 16-byte weight load per lane and row) for exact calls of at most 2 rows: measured
// faster on the H200 there (docs/performance.md); slower for more rows (registers) and in float mode
// (a lane's 32 floats of x are not one coalesced span).
bool vector_wide(const Layout &L, bool exact, int64_t max_S) {
    return exact && max_S <= 2 && vector_shape(L, exact) && vector_piece_fits(L, exact, vec_wide_piece(L.fmt));
}

// Whether the vector path runs this layout through matvec_split_kernel (kernels_matvec_split.cuh):
// whole 512-byte segments per row with no padding codes, and every piece within one scale group
// (exact G4: whole groups per segment, their lanes a power of two).
bool split_shape(const Layout &L, bool exact) {
    if (L.fmt == COLI_FORMAT_F32 || L.row_bytes % kSplitSegmentBytes != 0) return false;
    const int64_t piece = split_piece_codes(L.fmt);
    if (L.I != (int64_t)L.row_bytes / kSplitPieceBytes * piece) return false;
    if (L.fmt != COLI_FORMAT_G4) return true;
    return exact ? g4_group_lanes_ok(L.gs, piece) : L.gs % piece == 0;
}

// Whether the skinny tensor-core kernels (kernels_tensor_core_skinny.cuh) take this layout: exact
// Q4 or G4 rows of whole 16-byte pieces without padding codes (a piece's activations lie within
// the row), I small enough for the tensor-core kernels' 16 x sums; G4 groups of whole 128-code
// chunks, at most kSkinnyMaxGroups of them (the shared memory of their sums).
bool skinny_shape(const Layout &L, bool exact) {
    const bool g4 = L.fmt == COLI_FORMAT_G4 && L.gs % kSkinnyChunkCodes == 0 && L.groups <= kSkinnyMaxGroups;
    return exact && (L.fmt == COLI_FORMAT_Q4 || g4) && L.row_bytes % 16 == 0 && L.I == 2 * (int64_t)L.row_bytes &&
           L.I <= kTileMaxInputs;
}

// Whether a path takes this layout on this device (the registry order of matmul_paths; the
// portable path takes every layout).
bool path_available(const DeviceContext &ctx, const Layout &L, bool exact, MatmulPath path) {
    switch (path) {
    case MatmulPath::portable: return true;
    case MatmulPath::vector: return vector_shape(L, exact);
    case MatmulPath::split: return split_shape(L, exact);
    case MatmulPath::tensor_core: return tensor_cores_for(ctx, exact) && tensor_core_shape(L, exact);
    case MatmulPath::skinny: return ctx.tensor_cores && skinny_shape(L, exact);
    case MatmulPath::warpgroup: return ctx.warpgroup_mma && wgmma_shape(L, exact);
    default: return false;
    }
}

// The path a call takes; an explicit request that cannot be met is an error.
coli_status choose_path(const DeviceContext &ctx, const Layout &L, int64_t S, bool exact, MatmulPath requested,
                        MatmulPath *chosen, std::string *why) {
    const bool tc_ok = path_available(ctx, L, exact, MatmulPath::tensor_core);
    const bool vec_ok = path_available(ctx, L, exact, MatmulPath::vector);
    const bool split_ok = path_available(ctx, L, exact, MatmulPath::split);
    const bool skinny_ok = path_available(ctx, L, exact, MatmulPath::skinny);
    if (requested == MatmulPath::tensor_core && !tc_ok) {
        *why = std::string("the tensor-core path is not available here (") +
               (!tensor_cores_for(ctx, exact) ? (ctx.tensor_cores ? "W4A16 is not enabled (COLI_CUDA_TC_W4A16=1)"
                                                                   : "not compiled in or present on this device")
                                  : "it takes Q4, or G4 with gs a multiple of 32 in exact mode") + ")";
        return COLI_ERR_UNSUPPORTED;
    }
    if (requested == MatmulPath::vector && !vec_ok) {
        *why = "the vector path does not take this shape (row bytes a multiple of 16; float mode: I a multiple of "
               "the codes per 16 bytes; G4: gs a multiple of them, at most 32 lanes per group)";
        return COLI_ERR_UNSUPPORTED;
    }
    if (requested == MatmulPath::split && !split_ok) {
        *why = "the split path does not take this shape (rows of whole 512-byte segments; G4: gs a multiple of the "
               "codes per 16 bytes, in exact mode dividing the segment)";
        return COLI_ERR_UNSUPPORTED;
    }
    if (requested == MatmulPath::skinny && !skinny_ok) {
        *why = std::string("the skinny tensor-core path is not available here (") +
               (!ctx.tensor_cores ? "not compiled in or present on this device"
                                  : "it takes exact Q4, or exact G4 with gs a multiple of 128 and at most 96 groups, with "
                                    "I = 2 x row bytes, a multiple of 32") + ")";
        return COLI_ERR_UNSUPPORTED;
    }
    if (requested == MatmulPath::warpgroup && !path_available(ctx, L, exact, MatmulPath::warpgroup)) {
        *why = std::string("the warpgroup path is not available here (") +
               (!ctx.warpgroup_mma ? "it needs sm_90a code in the build (-Dgpu_arch=sm_90a or native) and a compute-capability 9.0 device"
                           : "it takes exact Q4, or G4 with groups of a multiple of 32 codes up to 4128, with rows of whole 16-byte "
                             "pieces") + ")";
        return COLI_ERR_UNSUPPORTED;
    }
    // Exact G4: one row on vector (its group products staged, and the decode group's fused
    // launches); 2 to 32 rows on skinny where its groups are whole chunks (as Q4), else on split,
    // which wins where vector's in-order G4 epilogue runs per step, and over the tensor cores too
    // up to 16 rows, 32 for rows longer than the matrix is tall (kernels_matvec_split.cuh;
    // measured, docs/performance.md)
    const bool split_g4 = split_ok && exact && L.fmt == COLI_FORMAT_G4 && !(S == 1 && vec_ok);
    const int64_t split_g4_max_rows = L.I > L.O ? kSplitMaxAutoRowsExactG4LongRows : kSplitMaxAutoRowsExactG4;
    if (requested != MatmulPath::automatic) *chosen = requested;
    else if (skinny_ok && S >= kSkinnyMinRows && S <= kSkinnyMaxAutoRows) *chosen = MatmulPath::skinny;
    else if (split_g4 && S <= split_g4_max_rows) *chosen = MatmulPath::split;
    else if (tc_ok && S >= kTcMinRows) *chosen = MatmulPath::tensor_core;
    else if (split_g4) *chosen = MatmulPath::split;
    else *chosen = vec_ok ? MatmulPath::vector : MatmulPath::portable;
    return COLI_OK;
}

// A kernel output buffer: grown as needed and, with COLI_GPU_POISON=1, filled with 0xff bytes
// (NaN floats, -1 codes) so that a kernel which writes nothing cannot pass on stale results.
coli_status ensure_output(DeviceContext &ctx, DeviceBuffer &b, size_t bytes, const char *what, std::string *why) {
    COLI_GPU_CHECK(ensure(b, bytes, what, why));
    if (g_poison) COLI_GPU_OP(cudaMemsetAsync(b.ptr, 0xff, bytes, ctx.stream), "poison output");
    return COLI_OK;
}

// Calls f(V) as an integral constant where a row of I floats (a multiple of 4) is held in
// registers as V float4s per thread (held_row_float4s); does nothing where it is not.
template <class F> void with_held_row(int64_t I, F f) {
    switch (I % 4 == 0 ? held_row_float4s(I) : 0) {
    case 2: f(std::integral_constant<int, 2>{}); break;
    case 4: f(std::integral_constant<int, 4>{}); break;
    case 8: f(std::integral_constant<int, 8>{}); break;
    default: break;
    }
}

// Quantizes S rows of x_dev [S][I] into q [S][ldq] and sx [S].
coli_status quantize_rows(DeviceContext &ctx, const float *x_dev, int64_t S, int64_t I, int8_t *q, float *sx,
                          std::string *why) {
    void (*kernel)(const float *, int, int8_t *, int, float *) = quantize_rows_kernel;
    with_held_row(I, [&](auto v) { kernel = quantize_short_rows_kernel<decltype(v)::value>; });
    COLI_GPU_LAUNCH_OVERLAPPED(ctx, "quantize_rows_kernel", kernel, dim3((unsigned)S), dim3(kBlockThreads), 0,
                               x_dev, (int)I, q, (int)padded_inputs(I), sx);
    return COLI_OK;
}

// One matmul of a launch sequence: y = W x for S rows already on the device (exact: q, sx).
struct MatmulJob {
    const DeviceTensor *t;
    const int8_t *q;
    const float *sx;
    const float *x;
    float *y;
    int64_t S;
};

// Blocks of this kernel the whole device holds at once (cached per kernel), at kBlockThreads
// threads and smem_bytes of dynamic shared memory per block.
template <class Kernel> int resident_blocks(DeviceContext &ctx, Kernel kernel, int smem_bytes = 0) {
    const void *key = reinterpret_cast<const void *>(kernel);
    auto it = ctx.resident_blocks.find(key);
    if (it != ctx.resident_blocks.end()) return it->second;
    int per_sm = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kBlockThreads, smem_bytes) != cudaSuccess) {
        cudaGetLastError(); // a query only: size as if one block fits
        per_sm = 1;
    }
    return ctx.resident_blocks[key] = std::max(per_sm, 1) * ctx.multiprocessors;
}

// One launch of matvec_split_kernel: one wave of blocks over the batch's row pairs, the shared
// memory for their unit sums capped (more, smaller blocks when it would not fit).
template <int FMT, int ST, bool EXACT>
coli_status launch_split(DeviceContext &ctx, const BatchArgs &a, int64_t max_S, std::string *why) {
    SplitShape sh;
    sh.pairs_per_problem = (a.O + kVecRowsPerGroup - 1) / kVecRowsPerGroup;
    sh.total_pairs = a.n * sh.pairs_per_problem;
    sh.segments = a.row_bytes / kSplitSegmentBytes;
    const bool g4_exact = EXACT && FMT == kG4;
    sh.units = g4_exact ? a.I / a.gs : sh.segments;
    sh.unit_lanes = g4_exact ? a.gs / split_piece_codes(FMT) : kRowLanes;
    sh.unit_shift = ceil_log2(sh.unit_lanes);
    constexpr int kMaxSharedBytes = 32 * 1024;
    const int64_t pair_bytes = (int64_t)kVecRowsPerGroup * ST * sh.units * 4;
    const unsigned gy = (unsigned)((max_S + ST - 1) / ST);
    const int64_t wave = std::max<int64_t>(1, resident_blocks(ctx, matvec_split_kernel<FMT, ST, EXACT>) / gy);
    const int64_t fit = std::max<int64_t>(1, kMaxSharedBytes / pair_bytes); // pairs per block
    const int64_t gx = std::min<int64_t>(sh.total_pairs, std::max(wave, (sh.total_pairs + fit - 1) / fit));
    const size_t smem = (size_t)((sh.total_pairs + gx - 1) / gx * pair_bytes);
    COLI_GPU_LAUNCH_OVERLAPPED(ctx, "matvec_split_kernel", (matvec_split_kernel<FMT, ST, EXACT>), dim3((unsigned)gx, gy),
                               dim3(kBlockThreads), smem, a, sh);
    return COLI_OK;
}

template <int FMT, int ST, bool EXACT>
coli_status launch_vector(DeviceContext &ctx, const BatchArgs &a, int64_t max_S, bool wide, std::string *why) {
    const dim3 grid((unsigned)(a.p[a.n - 1].first_block + (a.O + kVecRowsPerBlock - 1) / kVecRowsPerBlock),
                    (unsigned)((max_S + ST - 1) / ST));
    void (*kernel)(BatchArgs) = matvec_kernel<FMT, ST, EXACT, false>;
    if constexpr (EXACT && ST <= 2) { // the only wide instances (vector_wide)
        if (wide) kernel = matvec_kernel<FMT, ST, EXACT, true>;
    }
    COLI_GPU_LAUNCH_OVERLAPPED(ctx, "matvec_kernel", kernel, grid, dim3(kBlockThreads), 0, a);
    return COLI_OK;
}

// The activation rows per block of the vector and split kernels for a batch's largest S.
int row_tile(int64_t max_S) { return max_S == 1 ? 1 : max_S == 2 ? 2 : max_S <= 4 ? 4 : 8; }

// Calls f(ST, EXACT) as integral constants: row_tile(max_S) and the numerics mode as a template flag.
template <class F> coli_status with_row_tile(int64_t max_S, bool exact, F f) {
    const auto mode = [&](auto st) { return exact ? f(st, std::true_type{}) : f(st, std::false_type{}); };
    switch (row_tile(max_S)) {
    case 1: return mode(std::integral_constant<int, 1>{});
    case 2: return mode(std::integral_constant<int, 2>{});
    case 4: return mode(std::integral_constant<int, 4>{});
    default: return mode(std::integral_constant<int, 8>{});
    }
}

// Calls f(FMT) with the format of a vector-path layout as an integral constant.
template <class F> coli_status with_vector_format(int fmt, F f) {
    switch (fmt) {
    case COLI_FORMAT_Q8: return f(std::integral_constant<int, kQ8>{});
    case COLI_FORMAT_Q4: return f(std::integral_constant<int, kQ4>{});
    case COLI_FORMAT_Q2: return f(std::integral_constant<int, kQ2>{});
    default: return f(std::integral_constant<int, kG4>{});
    }
}

#if COLI_NV_TENSOR_CORE_PATHS
template <int FMT, int BM> coli_status launch_tiled_rows(const BatchArgs &a, int blocks, int64_t max_S, cudaStream_t stream, std::string *why) {
    const dim3 grid((unsigned)(a.n * blocks), (unsigned)((max_S + BM - 1) / BM));
    COLI_GPU_LAUNCH("mma_exact_tiled_kernel",
                    mma_exact_tiled_kernel<FMT, BM><<<grid, kTileThreads, tile_smem_bytes<BM>(), stream>>>(a));
    return COLI_OK;
}
#endif // COLI_NV_TENSOR_CORE_PATHS

// 128-row tiles halve the weight tiles' reloads, but only pay while they still give every
// multiprocessor a block (a 2048 x 6144 matrix at 512 rows has 64 of them: 64-row tiles win).
// The same holds for the wgmma kernel's 128-row tiles against the tiled kernel's 64-row ones.
bool tall_tiles_fill_device(const DeviceContext &ctx, const BatchArgs &a, int blocks, int64_t max_S) {
    return (int64_t)a.n * blocks * ((max_S + 127) / 128) >= ctx.multiprocessors;
}

template <int FMT>
coli_status launch_tiled(const DeviceContext &ctx, const BatchArgs &a, int blocks, int64_t max_S, std::string *why) {
#if COLI_NV_TENSOR_CORE_PATHS
    const bool tall = tall_tiles_fill_device(ctx, a, blocks, max_S);
    return tall ? launch_tiled_rows<FMT, 128>(a, blocks, max_S, ctx.stream, why)
                : launch_tiled_rows<FMT, 64>(a, blocks, max_S, ctx.stream, why);
#else
    (void)ctx, (void)a, (void)blocks, (void)max_S;
    *why = "tensor-core kernels are not part of this build";
    return COLI_ERR_UNSUPPORTED;
#endif // COLI_NV_TENSOR_CORE_PATHS
}

#if COLI_NV_TENSOR_CORE_PATHS
// A batch on the wgmma kernel: tiles of 128 weight rows (the tiled kernel's tall shape) by NB
// activation rows, walked by at most one wave of blocks (the kernel is persistent).
template <int FMT, int NB, bool HALVES = false>
coli_status launch_wgmma_rows(DeviceContext &ctx, const BatchArgs &a, int blocks, std::string *why) {
    const int64_t tiles = wgmma_tile_count(a, blocks, NB);
    if (tiles == 0) return COLI_OK;
    constexpr int smem = wg_smem_bytes<FMT, NB, HALVES>();
    const int64_t wave = resident_blocks(ctx, wgmma_exact_kernel<FMT, NB, HALVES>, smem);
    const dim3 grid((unsigned)std::min(tiles, wave));
    COLI_GPU_LAUNCH("wgmma_exact_kernel", (wgmma_exact_kernel<FMT, NB, HALVES><<<grid, kWgThreads, smem, ctx.stream>>>(a)));
    return COLI_OK;
}
#endif // COLI_NV_TENSOR_CORE_PATHS

// G4 takes 64-row tiles where 128-row ones would leave multiprocessors idle (as the tiled kernel
// does): its two blocks per multiprocessor then hold every tile at once. On 128-row tiles, groups
// of whole K steps take the kernel that steps in halves (wgmma_g4_step_in_halves).
template <int FMT> coli_status launch_wgmma(DeviceContext &ctx, const BatchArgs &a, int blocks, int64_t max_S, std::string *why) {
#if COLI_NV_TENSOR_CORE_PATHS
    static_assert(kWgThreads == kBlockThreads, "resident_blocks sizes blocks of kBlockThreads");
    if constexpr (FMT == kG4) {
        if (!tall_tiles_fill_device(ctx, a, blocks, max_S)) return launch_wgmma_rows<FMT, 64>(ctx, a, blocks, why);
        if (a.gs % kWgK == 0) return launch_wgmma_rows<FMT, 128, true>(ctx, a, blocks, why);
    }
    return launch_wgmma_rows<FMT, 128>(ctx, a, blocks, why);
#else
    (void)ctx, (void)a, (void)blocks, (void)max_S;
    *why = "tensor-core kernels are not part of this build";
    return COLI_ERR_UNSUPPORTED;
#endif // COLI_NV_TENSOR_CORE_PATHS
}

// A batch on the skinny kernels (mma_skinny_kernel) of format fmt: blocks of 16 rows per problem,
// 8 activation rows per grid row; with swiglu, the batch's problems are gate/up pairs and the
// launch writes h.
coli_status launch_skinny(DeviceContext &ctx, int fmt, bool swiglu, const BatchArgs &a, int blocks, int64_t max_S,
                          std::string *why) {
#if COLI_NV_TENSOR_CORE_PATHS
    const dim3 grid((unsigned)(a.n * blocks), (unsigned)((max_S + kSkinnyMaxS - 1) / kSkinnyMaxS));
    const bool g4 = fmt == COLI_FORMAT_G4;
    void (*kernel)(BatchArgs) = g4 ? (swiglu ? mma_skinny_kernel<kG4, 2> : mma_skinny_kernel<kG4, 1>)
                                   : (swiglu ? mma_skinny_kernel<kQ4, 2> : mma_skinny_kernel<kQ4, 1>);
    const size_t smem = g4 ? (size_t)skinny_group_smem_bytes(a.ng, swiglu ? 2 : 1) : 0;
    COLI_GPU_LAUNCH_OVERLAPPED(ctx, "mma_skinny_kernel", kernel, grid, dim3(32 * kSkinnyWarps), smem, a);
    return COLI_OK;
#else
    (void)ctx, (void)fmt, (void)swiglu, (void)a, (void)blocks, (void)max_S;
    *why = "tensor-core kernels are not part of this build";
    return COLI_ERR_UNSUPPORTED;
#endif // COLI_NV_TENSOR_CORE_PATHS
}

coli_status launch_single(const DeviceContext &ctx, const MatmulJob &j, MatmulPath path, bool exact, std::string *why) {
    const MatmulArgs a = args_for(*j.t, j.q, j.sx, j.x, j.y, j.S);
    const bool tc = path == MatmulPath::tensor_core;
    switch (j.t->L.fmt) {
    case COLI_FORMAT_F32: return launch_portable<kF32>(a, exact, ctx.stream, why);
    case COLI_FORMAT_Q8: return launch_portable<kQ8>(a, exact, ctx.stream, why);
    case COLI_FORMAT_Q2: return launch_portable<kQ2>(a, exact, ctx.stream, why);
    case COLI_FORMAT_Q4:
        return tc ? launch_tensor_core<kQ4>(a, exact, ctx.stream, why) : launch_portable<kQ4>(a, exact, ctx.stream, why);
    default:
        return tc ? launch_tensor_core<kG4>(a, exact, ctx.stream, why) : launch_portable<kG4>(a, exact, ctx.stream, why);
    }
}

// A batch of matrices of layout L, without its problems.
BatchArgs batch_args_for(const Layout &L) {
    BatchArgs a{};
    a.O = (int)L.O;
    a.I = (int)L.I;
    a.row_bytes = (int)L.row_bytes;
    a.gs = (int)L.gs;
    a.ng = (int)(L.groups > 0 ? L.groups : 1);
    a.ldq = (int)padded_inputs(L.I);
    a.gs_magic = L.gs >= 2 ? (unsigned)(((1ull << 32) + (uint64_t)L.gs - 1) / (uint64_t)L.gs) : 0u;
    return a;
}

bool same_layout(const Layout &a, const Layout &b) { return a.fmt == b.fmt && a.O == b.O && a.I == b.I && a.gs == b.gs; }

// The vector and skinny kernels take any rows per problem: automatic batches the jobs that pick
// either and picks for the batch by its largest S (batch_path).
bool small_s_path(MatmulPath p) { return p == MatmulPath::vector || p == MatmulPath::skinny; }

// The path of a batch of one layout whose jobs chose `first` .. on their own, `max_S` the most rows.
coli_status batch_path(const DeviceContext &ctx, const Layout &L, int64_t max_S, bool exact, MatmulPath requested,
                       MatmulPath first, MatmulPath *chosen, std::string *why) {
    if (requested != MatmulPath::automatic || !small_s_path(first)) {
        *chosen = first;
        return COLI_OK;
    }
    return choose_path(ctx, L, max_S, exact, requested, chosen, why);
}

// Runs the jobs in order. Consecutive jobs of one layout on a batched path share a launch (up to
// kBatchProblems): an expert group's gate and up projections are one launch.
coli_status run_matmuls(DeviceContext &ctx, const MatmulJob *jobs, size_t n, int numerics, MatmulPath path,
                        std::string *why) {
    const bool exact = numerics == COLI_NUMERICS_EXACT;
    for (size_t i = 0; i < n;) {
        const Layout &L = jobs[i].t->L;
        MatmulPath first;
        COLI_GPU_CHECK(choose_path(ctx, L, jobs[i].S, exact, path, &first, why));
        if (first == MatmulPath::portable || (first == MatmulPath::tensor_core && !tiled_shape(L, exact))) {
            COLI_GPU_CHECK(launch_single(ctx, jobs[i], first, exact, why));
            ++i;
            continue;
        }
        size_t end = i;
        int64_t max_S = 0;
        for (; end < n && end - i < (size_t)kBatchProblems && same_layout(jobs[end].t->L, L); ++end) {
            MatmulPath next;
            COLI_GPU_CHECK(choose_path(ctx, L, jobs[end].S, exact, path, &next, why));
            if (next != first && !(small_s_path(next) && small_s_path(first))) break;
            max_S = std::max(max_S, jobs[end].S);
        }
        MatmulPath chosen;
        COLI_GPU_CHECK(batch_path(ctx, L, max_S, exact, path, first, &chosen, why));
        const bool tiled = chosen == MatmulPath::tensor_core || chosen == MatmulPath::warpgroup, skinny = chosen == MatmulPath::skinny;
        BatchArgs a = batch_args_for(L);
        const int rows_per_block = tiled ? kTileN : skinny ? kSkinnyRows : kVecRowsPerBlock;
        const int blocks = (int)((L.O + rows_per_block - 1) / rows_per_block);
        for (; i < end; ++i) {
            const MatmulJob &j = jobs[i];
            a.p[a.n] = BatchProblem{j.t->weights.as<uint8_t>(), j.t->scales.as<float>(), j.q, j.sx, j.x, j.y, (int)j.S,
                                    a.n * blocks};
            ++a.n;
        }
        // automatic trades the tiled kernel for wgmma where its 128-row tiles fill the device, and
        // for G4 everywhere (its 64-row tiles win where they do not; docs/performance.md).
        static_assert(kWgRowsA == kTileN, "the wgmma kernel runs the tiled kernel's tall blocks' weight rows");
        if (chosen == MatmulPath::warpgroup ||
            (path == MatmulPath::automatic && chosen == MatmulPath::tensor_core &&
             path_available(ctx, L, exact, MatmulPath::warpgroup) &&
             (L.fmt == COLI_FORMAT_G4 || tall_tiles_fill_device(ctx, a, blocks, max_S)))) {
            COLI_GPU_CHECK(L.fmt == COLI_FORMAT_Q4 ? launch_wgmma<kQ4>(ctx, a, blocks, max_S, why)
                                                   : launch_wgmma<kG4>(ctx, a, blocks, max_S, why));
            continue;
        }
        if (tiled) {
            COLI_GPU_CHECK(L.fmt == COLI_FORMAT_Q4 ? launch_tiled<kQ4>(ctx, a, blocks, max_S, why)
                                                   : launch_tiled<kG4>(ctx, a, blocks, max_S, why));
            continue;
        }
        if (skinny) {
            COLI_GPU_CHECK(launch_skinny(ctx, L.fmt, false, a, blocks, max_S, why));
            continue;
        }
        const bool wide = vector_wide(L, exact, max_S);
        COLI_GPU_CHECK(with_vector_format(L.fmt, [&](auto fmt) {
            return with_row_tile(max_S, exact, [&](auto st, auto ex) {
                constexpr int FMT = decltype(fmt)::value, ST = decltype(st)::value;
                constexpr bool EXACT = decltype(ex)::value;
                return chosen == MatmulPath::split ? launch_split<FMT, ST, EXACT>(ctx, a, max_S, why)
                                                   : launch_vector<FMT, ST, EXACT>(ctx, a, max_S, wide, why);
            });
        }));
    }
    return COLI_OK;
}

coli_status run_matmul(DeviceContext &ctx, const DeviceTensor &t, const int8_t *q, const float *sx, const float *x_dev,
                       float *y_dev, int64_t S, int numerics, MatmulPath path, std::string *why) {
    const MatmulJob job{&t, q, sx, x_dev, y_dev, S};
    return run_matmuls(ctx, &job, 1, numerics, path, why);
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

// ---- gate, up and hidden step in one launch (kernels_matvec_expert.cuh) ------------------------

// Whether matvec_swiglu_kernel (vector path) or mma_skinny_kernel<2> (skinny path) takes the
// gate and up projections: all gates and ups share one layout and the path chosen for the most
// rows of an expert (*max_S) is one of those two (*pair_path).
bool swiglu_pair_shape(DeviceContext &ctx, const Expert *experts, const int64_t *rows, size_t n_experts, bool exact,
                       MatmulPath path, int64_t *max_S, MatmulPath *pair_path) {
    if (path != MatmulPath::automatic && !small_s_path(path)) return false;
    const Layout &G = experts[0].gate->L;
    *max_S = 0;
    for (size_t e = 0; e < n_experts; ++e) {
        if (!same_layout(experts[e].gate->L, G) || !same_layout(experts[e].up->L, G)) return false;
        *max_S = std::max(*max_S, rows[e]);
    }
    std::string ignored;
    return *max_S > 0 && choose_path(ctx, G, *max_S, exact, path, pair_path, &ignored) == COLI_OK && small_s_path(*pair_path);
}

template <int FMT, int ST, bool EXACT>
coli_status launch_swiglu(DeviceContext &ctx, const BatchArgs &a, int64_t max_S, bool wide, std::string *why) {
    const dim3 grid((unsigned)(a.p[a.n - 1].first_block + (a.O + kSwigluRowsPerBlock - 1) / kSwigluRowsPerBlock),
                    (unsigned)((max_S + ST - 1) / ST));
    void (*kernel)(BatchArgs) = matvec_swiglu_kernel<FMT, ST, EXACT, false>;
    if constexpr (EXACT && ST <= 2) { // the only wide instances (vector_wide)
        if (wide) kernel = matvec_swiglu_kernel<FMT, ST, EXACT, true>;
    }
    COLI_GPU_LAUNCH_OVERLAPPED(ctx, "matvec_swiglu_kernel", kernel, grid, dim3(kBlockThreads), 0, a);
    return COLI_OK;
}

// h of every expert with rows (expert e's from h + h_off[e]), in batches of kBatchProblems experts.
// Arguments as enqueue_experts'.
coli_status enqueue_swiglu_pairs(DeviceContext &ctx, const Expert *experts, const int64_t *rows, size_t n_experts,
                                 const int64_t *input_row, const std::vector<int64_t> &r0, const std::vector<int64_t> &h_off,
                                 const float *x_dev, const int8_t *q, const float *sx, float *h, bool exact, int64_t max_S,
                                 MatmulPath pair_path, std::string *why) {
    const Layout &G = experts[0].gate->L;
    const int64_t D = G.I, ldq_in = padded_inputs(D);
    const bool skinny = pair_path == MatmulPath::skinny;
    const int rows_per_block = skinny ? kSkinnyRows : kSwigluRowsPerBlock;
    const int blocks = (int)((G.O + rows_per_block - 1) / rows_per_block);
    const bool wide = vector_wide(G, exact, max_S);
    for (size_t e = 0; e < n_experts;) {
        BatchArgs a = batch_args_for(G);
        for (; e < n_experts && a.n < kBatchProblems; ++e) {
            if (rows[e] == 0) continue;
            const int64_t in = input_row ? input_row[e] : r0[e];
            BatchProblem p{experts[e].gate->weights.as<uint8_t>(), experts[e].gate->scales.as<float>(),
                           exact ? q + in * ldq_in : nullptr, exact ? sx + in : nullptr, x_dev + in * D, h + h_off[e],
                           (int)rows[e], a.n * blocks};
            p.w2 = experts[e].up->weights.as<uint8_t>();
            p.scales2 = experts[e].up->scales.as<float>();
            a.p[a.n++] = p;
        }
        if (a.n == 0) continue;
        if (skinny) {
            COLI_GPU_CHECK(launch_skinny(ctx, G.fmt, true, a, blocks, max_S, why));
            continue;
        }
        COLI_GPU_CHECK(with_vector_format(G.fmt, [&](auto fmt) {
            return with_row_tile(max_S, exact, [&](auto st, auto ex) {
                return launch_swiglu<decltype(fmt)::value, decltype(st)::value, decltype(ex)::value>(ctx, a, max_S, wide, why);
            });
        }));
    }
    return COLI_OK;
}

// A one-token group's routed combination done by its down launch (matvec_down_combine_kernel):
// the experts' row weights in call order, and y [D].
struct DownCombine {
    RowWeights weights;
    float *y;
};

// Whether the down projections of these experts (rows as enqueue_experts') can take
// matvec_down_combine_kernel: one row or none per expert, at most kRowsPerBlock rows, one down
// layout, on the vector path at one row.
bool down_combine_shape(const DeviceContext &ctx, const Expert *experts, const int64_t *rows, size_t n_experts, bool exact,
                        MatmulPath path) {
    const Expert *first = nullptr;
    int n = 0;
    for (size_t e = 0; e < n_experts; ++e) {
        if (rows[e] == 0) continue;
        if (rows[e] > 1 || ++n > kRowsPerBlock) return false;
        if (!first) first = &experts[e];
        if (!same_layout(experts[e].down->L, first->down->L)) return false;
    }
    MatmulPath chosen;
    std::string ignored;
    return first && choose_path(ctx, first->down->L, 1, exact, path, &chosen, &ignored) == COLI_OK &&
           (chosen == MatmulPath::vector || chosen == MatmulPath::skinny);
}

// Rows per 32-lane group and pieces per lane in flight: exact mode's wide rows take 8 rows and 2
// pieces (a whole 1 KB row of the Q4 6144 x 2048 downs per load round; of 2, 4 or 8 rows, 8 was
// fastest on the H200, docs/performance.md); the other shapes matvec_kernel's 2 rows.
template <int FMT, bool EXACT>
coli_status launch_down_combine(DeviceContext &ctx, const BatchArgs &a, bool wide, const DownCombine &c, std::string *why) {
    const auto launch = [&](auto wide_c, auto r_c, auto u_c) -> coli_status {
        constexpr int R = decltype(r_c)::value;
        COLI_GPU_LAUNCH_OVERLAPPED(ctx, "matvec_down_combine_kernel",
                                   (matvec_down_combine_kernel<FMT, EXACT, decltype(wide_c)::value, R, decltype(u_c)::value>),
                                   dim3((unsigned)((a.O + R - 1) / R)), dim3(kBlockThreads), 0, a, c.weights, c.y);
        return COLI_OK;
    };
    if constexpr (EXACT) {
        if (wide) return launch(std::true_type{}, std::integral_constant<int, 8>{}, std::integral_constant<int, 2>{});
        return launch(std::false_type{}, std::integral_constant<int, 2>{}, std::integral_constant<int, 4>{});
    } else {
        (void)wide;
        return launch(std::false_type{}, std::integral_constant<int, 2>{}, std::integral_constant<int, 8>{});
    }
}

// The down projections and the combination of a group down_combine_shape accepts: the jobs
// enqueue_downs built (their outputs unused), in call order.
coli_status enqueue_down_combine(DeviceContext &ctx, const std::vector<MatmulJob> &jobs, bool exact, MatmulPath path,
                                 const DownCombine &c, std::string *why) {
    const Layout &L = jobs.front().t->L;
    BatchArgs a = batch_args_for(L);
    for (const MatmulJob &j : jobs) {
        a.p[a.n++] = BatchProblem{j.t->weights.as<uint8_t>(), j.t->scales.as<float>(), j.q, j.sx, j.x, nullptr, (int)j.S, 0};
    }
    MatmulPath chosen;
    COLI_GPU_CHECK(choose_path(ctx, L, 1, exact, path, &chosen, why));
#if COLI_NV_TENSOR_CORE_PATHS
    if (chosen == MatmulPath::skinny) {
        COLI_GPU_LAUNCH_OVERLAPPED(ctx, "mma_skinny_down_combine_kernel",
                                   L.fmt == COLI_FORMAT_G4 ? mma_skinny_down_combine_kernel<kG4>
                                                           : mma_skinny_down_combine_kernel<kQ4>,
                                   dim3((unsigned)((a.O + kSkinnyRows - 1) / kSkinnyRows)), dim3(32 * kRowsPerBlock), 0, a,
                                   c.weights, c.y);
        return COLI_OK;
    }
#endif // COLI_NV_TENSOR_CORE_PATHS
    const bool wide = vector_wide(L, exact, 1);
    return with_vector_format(L.fmt, [&](auto fmt) {
        return exact ? launch_down_combine<decltype(fmt)::value, true>(ctx, a, wide, c, why)
                     : launch_down_combine<decltype(fmt)::value, false>(ctx, a, wide, c, why);
    });
}

// The down projections of enqueue_experts: expert e's hidden rows start at h_off[e] (codes: hq_off[e],
// scales: r0[e]), its outputs at out + r0[e] * D; with combine (down_combine_shape holds), one
// launch that combines them into combine->y instead, out unused.
coli_status enqueue_downs(DeviceContext &ctx, const Expert *experts, const int64_t *rows, size_t n_experts,
                          const std::vector<int64_t> &r0, const std::vector<int64_t> &h_off, const std::vector<int64_t> &hq_off,
                          const float *h, const int8_t *hq, const float *hsx, float *out, int numerics, MatmulPath path,
                          const DownCombine *combine, std::string *why) {
    const bool exact = numerics == COLI_NUMERICS_EXACT;
    const int64_t D = experts[0].gate->L.I;
    std::vector<MatmulJob> jobs;
    for (size_t e = 0; e < n_experts; ++e) {
        if (rows[e] == 0) continue;
        jobs.push_back({experts[e].down, exact ? hq + hq_off[e] : nullptr, exact ? hsx + r0[e] : nullptr, h + h_off[e],
                        out ? out + r0[e] * D : nullptr, rows[e]});
    }
    if (combine) return enqueue_down_combine(ctx, jobs, exact, path, *combine, why);
    return run_matmuls(ctx, jobs.data(), jobs.size(), numerics, path, why);
}

// Fused expert MLPs on rows already on the device: expert e reads rows[e] rows of x_dev (exact: q,
// sx) from row input_row[e] (nullptr: the next rows) and writes the next rows[e] rows of out. Three
// launch stages whatever the number of experts: all gate and up projections, the hidden step, all
// down projections (grouped where the vector path takes them, run_matmuls). Where the vector path
// takes uniform gates and ups, the first two are one (enqueue_swiglu_pairs), and exact mode's
// hidden step only quantizes h. With combine (down_combine_shape holds), the down launch also
// combines the outputs into combine->y and out is not written.
coli_status enqueue_experts(DeviceContext &ctx, Scratch &b, const Expert *experts, const int64_t *rows, size_t n_experts,
                            const int64_t *input_row, const float *x_dev, const int8_t *q, const float *sx, float *out,
                            int numerics, MatmulPath path, const DownCombine *combine, std::string *why) {
    const bool exact = numerics == COLI_NUMERICS_EXACT;
    const int64_t D = experts[0].gate->L.I, ldq_in = padded_inputs(D);
    // Hidden rows of expert e start at element h_off[e] (codes: hq_off[e]); F may differ per expert.
    std::vector<int64_t> r0(n_experts), h_off(n_experts), hq_off(n_experts);
    int64_t total = 0, hidden = 0, codes = 0;
    for (size_t e = 0; e < n_experts; ++e) {
        const int64_t F = experts[e].gate->L.O;
        r0[e] = total;
        h_off[e] = hidden;
        hq_off[e] = codes;
        total += rows[e];
        hidden += rows[e] * F;
        codes += rows[e] * padded_inputs(F);
    }
    if (total == 0) return COLI_OK;
    COLI_GPU_CHECK(ensure_output(ctx, b.hidden, (size_t)hidden * sizeof(float), "hidden buffer", why));
    if (exact) { // the contract re-quantizes h per row for the down projection
        COLI_GPU_CHECK(ensure_output(ctx, b.hq, (size_t)codes, "hidden codes", why));
        COLI_GPU_CHECK(ensure_output(ctx, b.hsx, (size_t)total * sizeof(float), "hidden scales", why));
    }
    float *h = b.hidden.as<float>();
    int8_t *hq = exact ? b.hq.as<int8_t>() : nullptr;
    float *hsx = exact ? b.hsx.as<float>() : nullptr;
    int64_t max_S = 0;
    MatmulPath pair_path;
    if (swiglu_pair_shape(ctx, experts, rows, n_experts, exact, path, &max_S, &pair_path)) {
        COLI_GPU_CHECK(enqueue_swiglu_pairs(ctx, experts, rows, n_experts, input_row, r0, h_off, x_dev, q, sx, h, exact, max_S,
                                            pair_path, why));
        // F is uniform here, so h and its codes are whole rows of F and padded(F): one launch.
        if (exact) COLI_GPU_CHECK(quantize_rows(ctx, h, total, experts[0].gate->L.O, hq, hsx, why));
        return enqueue_downs(ctx, experts, rows, n_experts, r0, h_off, hq_off, h, hq, hsx, out, numerics, path, combine, why);
    }
    COLI_GPU_CHECK(ensure_output(ctx, b.gate, (size_t)hidden * sizeof(float), "gate buffer", why));
    COLI_GPU_CHECK(ensure_output(ctx, b.up, (size_t)hidden * sizeof(float), "up buffer", why));
    float *gate = b.gate.as<float>(), *up = b.up.as<float>();
    std::vector<MatmulJob> jobs;
    for (int pass = 0; pass < 2; ++pass) { // all gates, then all ups: consecutive jobs of one layout
        for (size_t e = 0; e < n_experts; ++e) {
            if (rows[e] == 0) continue;
            const int64_t in = input_row ? input_row[e] : r0[e];
            jobs.push_back({pass == 0 ? experts[e].gate : experts[e].up, exact ? q + in * ldq_in : nullptr,
                            exact ? sx + in : nullptr, x_dev + in * D, (pass == 0 ? gate : up) + h_off[e], rows[e]});
        }
    }
    COLI_GPU_CHECK(run_matmuls(ctx, jobs.data(), jobs.size(), numerics, path, why));
    // The hidden step over runs of consecutive experts with one F (one launch for uniform experts).
    for (size_t e = 0; e < n_experts;) {
        const int64_t F = experts[e].gate->L.O;
        size_t end = e;
        int64_t run_rows = 0;
        for (; end < n_experts && experts[end].gate->L.O == F; ++end) run_rows += rows[end];
        if (run_rows > 0 && exact) {
            void (*kernel)(const float *, const float *, float *, int, int8_t *, int, float *) = swiglu_quantize_kernel;
            with_held_row(F, [&](auto v) { kernel = swiglu_quantize_short_kernel<decltype(v)::value>; });
            COLI_GPU_LAUNCH_OVERLAPPED(ctx, "swiglu_quantize_kernel", kernel, dim3((unsigned)run_rows),
                                       dim3(kBlockThreads), 0, (const float *)(gate + h_off[e]), (const float *)(up + h_off[e]),
                                       h + h_off[e], (int)F, hq + hq_off[e], (int)padded_inputs(F), hsx + r0[e]);
        } else if (run_rows > 0) {
            const size_t n = (size_t)(run_rows * F);
            COLI_GPU_LAUNCH_OVERLAPPED(ctx, "swiglu_kernel", swiglu_kernel, dim3((unsigned)((n + 255) / 256)), dim3(256), 0,
                                       (const float *)(gate + h_off[e]), (const float *)(up + h_off[e]), h + h_off[e], n);
        }
        e = end;
    }
    return enqueue_downs(ctx, experts, rows, n_experts, r0, h_off, hq_off, h, hq, hsx, out, numerics, path, combine, why);
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

// The routed combination of the expert outputs in b.out into y, token by token in call order
// (combine_kernel).
coli_status enqueue_combine(DeviceContext &ctx, Scratch &b, const GroupCall &c, int64_t total, float *y, std::string *why) {
    // Routing as token -> rows in increasing row order (the call order), then the row weights
    // (RoutingTable, kernels_expert.cuh): in the launch's parameters when it fits, else one copy.
    const size_t entries = (size_t)c.n_tokens + 1 + 2 * (size_t)total;
    const bool inline_table = entries <= (size_t)kInlineRoutingWords;
    RoutingTable rt;
    rt.table = nullptr;
    rt.n_tokens = (int)c.n_tokens;
    rt.total = (int)total;
    if (!inline_table) COLI_GPU_CHECK(ensure(b.routing_host, entries * sizeof(int), "pinned routing table", why));
    int *start = inline_table ? rt.words : b.routing_host.as<int>(), *rows_of = start + c.n_tokens + 1;
    float *weights = reinterpret_cast<float *>(rows_of + total);
    std::fill(start, start + c.n_tokens + 1, 0);
    for (int64_t r = 0; r < total; ++r) ++start[(c.row_token.empty() ? r : c.row_token[r]) + 1];
    for (int64_t k = 1; k <= c.n_tokens; ++k) start[k] += start[k - 1];
    std::vector<int> fill(start, start + c.n_tokens);
    for (int64_t r = 0; r < total; ++r) rows_of[fill[(size_t)(c.row_token.empty() ? r : c.row_token[r])]++] = (int)r;
    for (int64_t r = 0; r < total; ++r) weights[r] = c.row_weight.empty() ? 1.0f : c.row_weight[(size_t)r];
    if (!inline_table) {
        COLI_GPU_CHECK(ensure(b.routing, entries * sizeof(int), "routing table", why));
        COLI_GPU_CHECK(copy_in(ctx, b.routing.ptr, start, entries * sizeof(int), "copy routing table", why));
        rt.table = b.routing.as<int>();
    }
    // Four columns per thread where rows stay 16-byte aligned (device buffers are), else one.
    const int columns = c.D % 4 == 0 ? 4 : 1;
    void (*kernel)(const float *, RoutingTable, float *, int) = columns == 4 ? combine_kernel<4> : combine_kernel<1>;
    const dim3 grid((unsigned)c.n_tokens, (unsigned)((c.D / columns + kCombineThreads - 1) / kCombineThreads));
    COLI_GPU_LAUNCH_OVERLAPPED(ctx, "combine_kernel", kernel, grid, dim3(kCombineThreads), 0, (const float *)b.out.as<float>(),
                               rt, y, (int)c.D);
    return COLI_OK;
}

// Where a group's activations come from and its result goes (device addresses), and whether it
// is a decode group (decode_group, decided once per call).
struct GroupIO {
    const float *x; // the staged rows [staged][D]
    float *y;       // [n_tokens][D]
    bool decode;
};

// A decode step's group: one token, its down projections and combine in one launch
// (down_combine_shape).
bool decode_group(const DeviceContext &ctx, const GroupCall &c) {
    return c.n_tokens == 1 &&
           down_combine_shape(ctx, c.experts.data(), c.rows.data(), c.experts.size(), c.numerics == COLI_NUMERICS_EXACT, c.path);
}

// The group from its staged activations at io.x (exact: quantized here) up to io.y: the experts
// on their rows, the combine in call order (a decode group's in its down launch, others' through
// the routing table).
coli_status enqueue_group_on_device(DeviceContext &ctx, Scratch &b, const GroupCall &c, const GroupInputs &in, const GroupIO &io,
                                    std::string *why) {
    int64_t total = 0;
    for (int64_t r : c.rows) total += r;
    const int64_t D = c.D;
    const bool exact = c.numerics == COLI_NUMERICS_EXACT;
    if (exact) {
        const int64_t staged = in.staged_rows;
        COLI_GPU_CHECK(ensure_output(ctx, b.q, (size_t)(staged * padded_inputs(D)), "activation codes", why));
        COLI_GPU_CHECK(ensure_output(ctx, b.sx, (size_t)staged * sizeof(float), "activation scales", why));
        COLI_GPU_CHECK(quantize_rows(ctx, io.x, staged, D, b.q.as<int8_t>(), b.sx.as<float>(), why));
    }
    const int8_t *q = exact ? b.q.as<int8_t>() : nullptr;
    const float *sx = exact ? b.sx.as<float>() : nullptr;
    if (io.decode) {
        DownCombine combine{{}, io.y};
        for (int64_t r = 0; r < total; ++r) combine.weights.w[r] = c.row_weight.empty() ? 1.0f : c.row_weight[(size_t)r];
        return enqueue_experts(ctx, b, c.experts.data(), c.rows.data(), c.experts.size(), in.staged_row.data(), io.x, q, sx,
                               nullptr, c.numerics, c.path, &combine, why);
    }
    COLI_GPU_CHECK(ensure_output(ctx, b.out, (size_t)(std::max<int64_t>(total, 1) * D) * sizeof(float), "expert outputs", why));
    COLI_GPU_CHECK(enqueue_experts(ctx, b, c.experts.data(), c.rows.data(), c.experts.size(), in.staged_row.data(), io.x, q, sx,
                                   b.out.as<float>(), c.numerics, c.path, nullptr, why));
    return enqueue_combine(ctx, b, c, total, io.y, why);
}

// The device address of pinned host memory (mapped into the device's address space).
template <class T> coli_status mapped(T *host, T **dev, std::string *why) {
    void *d = nullptr;
    COLI_GPU_OP(cudaHostGetDevicePointer(&d, const_cast<void *>(static_cast<const void *>(host)), 0), "map pinned staging");
    *dev = static_cast<T *>(d);
    return COLI_OK;
}

// The whole group from the caller's pinned staging: staged_x holds the staged rows, y_host takes
// the result. A decode group reads and writes the staging in place (zero-copy): exact mode's
// quantization reads x from it and the down launch writes y into it, so neither copy is queued
// (float mode still copies x: every block of the gate/up launch reads it). Other groups copy x in
// and y out asynchronously.
coli_status enqueue_group(DeviceContext &ctx, Scratch &b, const GroupCall &c, const GroupInputs &in, const float *staged_x,
                          float *y_host, std::string *why) {
    const bool exact = c.numerics == COLI_NUMERICS_EXACT, direct = decode_group(ctx, c);
    const size_t nx = (size_t)(in.staged_rows * c.D) * sizeof(float), ny = (size_t)(c.n_tokens * c.D) * sizeof(float);
    GroupIO io{nullptr, nullptr, direct};
    if (direct && exact) {
        COLI_GPU_CHECK(mapped(staged_x, &io.x, why));
    } else {
        COLI_GPU_CHECK(ensure(b.x, nx, "input buffer", why));
        COLI_GPU_CHECK(copy_in(ctx, b.x.ptr, staged_x, nx, "copy x to device", why));
        io.x = b.x.as<float>();
    }
    if (direct) {
        if (g_poison) std::memset(y_host, 0xff, ny); // as ensure_output does to device outputs
        COLI_GPU_CHECK(mapped(y_host, &io.y, why));
    } else {
        COLI_GPU_CHECK(ensure_output(ctx, b.y, ny, "group output", why));
        io.y = b.y.as<float>();
    }
    COLI_GPU_CHECK(enqueue_group_on_device(ctx, b, c, in, io, why));
    if (!direct) COLI_GPU_CHECK(copy_out(ctx, y_host, b.y.ptr, ny, "copy y to host", why));
    return COLI_OK;
}

// Gathers the rows of x that plan `in` stages (group_inputs.h) into pinned staging.
coli_status gather_into(const GroupInputs &in, const GroupCall &call, const float *x, PinnedBuffer &dst, std::string *why) {
    const size_t nx = (size_t)(in.staged_rows * call.D) * sizeof(float);
    COLI_GPU_CHECK(ensure(dst, nx, "pinned input", why));
    if (nx) gather_group_inputs(in, call.rows.data(), x, call.D, dst.as<float>());
    return COLI_OK;
}

// Stages the group's input rows into x_pinned and enqueues the group (results to y_host). A
// one-token group (top-k decode hands the token's row to each of its experts) is enqueued on the
// plan that assumes the repeats before plan_group_inputs compares the rows, so that the comparison
// runs while the device computes instead of before the first launch. Where the comparison finds a
// difference, the enqueued work is waited for (it reads the staging) and the group is enqueued
// again on the real plan: its writes replace the first pass's.
coli_status stage_and_enqueue_group(DeviceContext &ctx, Scratch &b, const GroupCall &call, const float *x,
                                    PinnedBuffer &x_pinned, float *y_host, std::string *why) {
    const size_t n = call.rows.size();
    const bool assume = call.n_tokens == 1;
    const GroupInputs first = assume ? assume_repeated_inputs(call.rows.data(), n) : plan_group_inputs(call.rows.data(), n, x, call.D);
    COLI_GPU_CHECK(gather_into(first, call, x, x_pinned, why));
    COLI_GPU_CHECK(enqueue_group(ctx, b, call, first, x_pinned.as<float>(), y_host, why));
    if (!assume) return COLI_OK;
    const GroupInputs real = plan_group_inputs(call.rows.data(), n, x, call.D);
    if (same_plan(first, real)) return COLI_OK;
    COLI_GPU_CHECK(sync(ctx, why));
    COLI_GPU_CHECK(gather_into(real, call, x, x_pinned, why));
    return enqueue_group(ctx, b, call, real, x_pinned.as<float>(), y_host, why);
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
        COLI_GPU_CHECK(probe_tensor_cores(*ctx, &tc, why));
        ctx->tensor_cores = tc;
        ctx->w4a16 = tc && options.tc_w4a16;
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

bool w4a16_active(int ordinal) {
    DeviceContext *ctx = context(ordinal);
    return ctx && ctx->w4a16;
}

std::vector<MatmulPath> matmul_paths(int ordinal, const Layout &L, int numerics) {
    DeviceContext *ctx = context(ordinal);
    if (!ctx) return {};
    const bool exact = numerics == COLI_NUMERICS_EXACT;
    std::vector<MatmulPath> paths;
    for (MatmulPath path : {MatmulPath::portable, MatmulPath::vector, MatmulPath::split, MatmulPath::tensor_core, MatmulPath::skinny,
                             MatmulPath::warpgroup})
        if (path_available(*ctx, L, exact, path)) paths.push_back(path);
    return paths;
}

MatmulPath automatic_path(int ordinal, const Layout &L, int64_t S, int numerics) {
    DeviceContext *ctx = context(ordinal);
    MatmulPath chosen = MatmulPath::automatic;
    std::string ignored;
    if (ctx) choose_path(*ctx, L, S, numerics == COLI_NUMERICS_EXACT, MatmulPath::automatic, &chosen, &ignored);
    return chosen;
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
    COLI_GPU_CHECK(enqueue_experts(ctx, b, &e, &S, 1, nullptr, b.x.as<float>(), b.q.as<int8_t>(), b.sx.as<float>(), b.y.as<float>(),
                                   numerics, MatmulPath::automatic, nullptr, why));
    COLI_GPU_CHECK(copy_out(ctx, y, b.y.ptr, ny, "copy y to host", why));
    return sync(ctx, why);
}

// Activations and results pass through pinned staging: the copies run asynchronously with the
// launches, and the host's memcpy is cheaper than a pageable transfer.
coli_status expert_group(const GroupCall &call, const float *x, float *y, std::string *why) {
    DeviceContext &ctx = *context(call.experts[0].gate->ordinal);
    std::lock_guard<std::mutex> lock(ctx.mutex);
    COLI_GPU_CHECK(select_device(ctx.ordinal, why));
    Scratch &b = ctx.scratch;
    const size_t ny = (size_t)(call.n_tokens * call.D) * sizeof(float);
    COLI_GPU_CHECK(ensure(b.y_host, ny, "pinned output", why));
    COLI_GPU_CHECK(stage_and_enqueue_group(ctx, b, call, x, b.x_host, b.y_host.as<float>(), why));
    COLI_GPU_CHECK(sync(ctx, why));
    if (ny) std::memcpy(y, b.y_host.ptr, ny);
    return COLI_OK;
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
    const size_t ny = (size_t)(call.n_tokens * call.D);
    COLI_GPU_CHECK(ensure(ticket->y_pinned, ny * sizeof(float), "pinned output", why));
    ticket->y_count = ny;
    // x is staged before this returns: the caller may reuse it
    COLI_GPU_CHECK(stage_and_enqueue_group(ctx, ticket->buffers, call, x, ticket->x_pinned, ticket->y_pinned.as<float>(), why));
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

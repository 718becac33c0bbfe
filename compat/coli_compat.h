// coli_compat.h — the ONE vendor header of colibri-gpu.
//
// Every difference between NVIDIA and AMD lives here; src/ never tests a vendor macro, includes a
// vendor header or calls a vendor intrinsic (compat/check_vendor_leaks.py enforces it).
//
// Three compilation modes:
//   nvcc  (__CUDACC__)          pass-through to the CUDA runtime; CUDA intrinsics.
//   hipcc (__HIPCC__/__HIP__)   the CUDA runtime names src/gpu uses are mapped onto HIP.
//   host  (g++/clang++)         no vendor header at all: COLI_HD is empty, so headers shared by the
//                               CPU reference and the kernels compile as plain C++.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <math.h>
#include <string.h>

#if defined(__HIPCC__) || defined(__HIP__)
#define COLI_GPU_VENDOR_HIP 1
#include <hip/hip_runtime.h>
#if !defined(__HIP_PLATFORM_AMD__) && !defined(__HIP_PLATFORM_HCC__)
#error "colibri-gpu compiles HIP for AMD only; build NVIDIA GPUs with -Dgpu=cuda (nvcc)"
#endif // !__HIP_PLATFORM_AMD__

// CUDA runtime names used by src/gpu, mapped onto HIP. Add a name here when src/gpu needs one.
#define cudaError_t hipError_t
#define cudaSuccess hipSuccess
#define cudaErrorNoDevice hipErrorNoDevice
#define cudaGetErrorString hipGetErrorString
#define cudaGetErrorName hipGetErrorName
#define cudaGetLastError hipGetLastError
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaGetDeviceProperties hipGetDeviceProperties
#define cudaDeviceProp hipDeviceProp_t
#define cudaSetDevice hipSetDevice
#define cudaDriverGetVersion hipDriverGetVersion
#define cudaRuntimeGetVersion hipRuntimeGetVersion
#define cudaMalloc hipMalloc
#define cudaFree hipFree
#define cudaMemcpy hipMemcpy
#define cudaMemcpyHostToDevice hipMemcpyHostToDevice
#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#define cudaDeviceSynchronize hipDeviceSynchronize
#define cudaMemGetInfo hipMemGetInfo
#define cudaErrorMemoryAllocation hipErrorOutOfMemory
#define cudaStream_t hipStream_t
#define cudaStreamCreateWithFlags hipStreamCreateWithFlags
#define cudaStreamNonBlocking hipStreamNonBlocking
#define cudaStreamDestroy hipStreamDestroy
#define cudaStreamSynchronize hipStreamSynchronize
#define cudaMemcpyAsync hipMemcpyAsync
#define cudaMemsetAsync hipMemsetAsync
#define cudaMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define cudaMallocHost hipHostMalloc
#define cudaFreeHost hipHostFree
#define cudaHostGetDevicePointer hipHostGetDevicePointer
#define cudaFuncSetAttribute hipFuncSetAttribute
#define cudaOccupancyMaxActiveBlocksPerMultiprocessor hipOccupancyMaxActiveBlocksPerMultiprocessor
#define cudaEvent_t hipEvent_t
#define cudaEventCreate hipEventCreate
#define cudaEventRecord hipEventRecord
#define cudaEventSynchronize hipEventSynchronize
#define cudaEventElapsedTime hipEventElapsedTime
#define cudaEventDestroy hipEventDestroy

#define COLI_GPU_RUNTIME_NAME "HIP"
#define COLI_GPU_VENDOR_NAME "AMD"
#define COLI_GPU_BACKEND_NAME "hip"

#elif defined(__CUDACC__)
#define COLI_GPU_VENDOR_CUDA 1
#include <cuda_runtime.h>
#define COLI_GPU_RUNTIME_NAME "CUDA"
#define COLI_GPU_VENDOR_NAME "NVIDIA"
#define COLI_GPU_BACKEND_NAME "cuda"
#endif // vendor selection

#if defined(COLI_GPU_VENDOR_HIP) || defined(COLI_GPU_VENDOR_CUDA)
#define COLI_GPU_COMPILER 1
#define COLI_HD __host__ __device__
#define COLI_DEVICE __device__
#else
#define COLI_HD
#endif // COLI_GPU_VENDOR_*

// True in the device compilation pass only (kernels and __device__ code).
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#define COLI_DEVICE_PASS 1
#endif // device pass

// ---------------------------------------------------------------------------------------------
// Float operations that must round exactly once, as written (docs/numerics.md).
//
// Exact mode is specified bit for bit, so no product may be fused into a following add. nvcc
// contracts a*b+c into an FMA by default: its __f*_rn intrinsics are never contracted. hipcc
// (clang) defaults to -ffp-contract=fast, which fuses even across inlined functions unless the
// operation itself is marked; the pragma does that. Host builds use -ffp-contract=off.
// Division and the reciprocal are IEEE (nvcc -prec-div=true; HIP's correctly rounded default).
// ---------------------------------------------------------------------------------------------
#if defined(COLI_DEVICE_PASS) && defined(COLI_GPU_VENDOR_CUDA)
COLI_HD inline float coli_fmul_rn(float a, float b) { return __fmul_rn(a, b); }
COLI_HD inline float coli_fadd_rn(float a, float b) { return __fadd_rn(a, b); }
COLI_HD inline float coli_fdiv_rn(float a, float b) { return __fdiv_rn(a, b); }
#else
COLI_HD inline float coli_fmul_rn(float a, float b) {
#if defined(__clang__)
#pragma clang fp contract(off)
#endif // __clang__
    return a * b;
}
COLI_HD inline float coli_fadd_rn(float a, float b) {
#if defined(__clang__)
#pragma clang fp contract(off)
#endif // __clang__
    return a + b;
}
COLI_HD inline float coli_fdiv_rn(float a, float b) {
#if defined(__clang__)
#pragma clang fp contract(off)
#endif // __clang__
    return a / b;
}
#endif // device pass, CUDA

// ---------------------------------------------------------------------------------------------
// Device-side capabilities (meaningful in the device pass; the host pass sees the defaults).
// ---------------------------------------------------------------------------------------------

// Warp/wavefront size as a compile-time constant of the target being compiled: 32 on NVIDIA and
// RDNA (wave32), 64 on GCN/CDNA. Never ROCm's run-time warpSize (ROCm 7 made it a variable).
#if defined(COLI_GPU_VENDOR_HIP) && defined(__AMDGCN_WAVEFRONT_SIZE)
#define COLI_WARP_SIZE __AMDGCN_WAVEFRONT_SIZE
#else
#define COLI_WARP_SIZE 32
#endif // wavefront size

// Tensor-core (NVIDIA mma.sync) availability of the target being compiled. An NVIDIA-only path
// is compiled only where this is 1; HIP always takes the portable kernels, so no empty kernel can
// ever be selected at run time.
#if defined(COLI_GPU_VENDOR_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define COLI_HAS_NV_TENSOR_CORES 1
#else
#define COLI_HAS_NV_TENSOR_CORES 0
#endif // tensor cores

// NVIDIA tensor-core kernels exist in this build (CUDA only; both compilation passes). The
// device pass of each target additionally says, through COLI_HAS_NV_TENSOR_CORES, whether its
// kernel bodies were compiled; the host verifies that with a probe kernel before using them.
#if defined(COLI_GPU_VENDOR_CUDA)
#define COLI_NV_TENSOR_CORE_PATHS 1
#else
#define COLI_NV_TENSOR_CORE_PATHS 0
#endif // COLI_GPU_VENDOR_CUDA

// float -> bfloat16 bits, round to nearest even (NaN stays NaN). Portable: no vendor type needed.
COLI_HD inline unsigned coli_bf16_bits(float f) {
    unsigned u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

#if defined(COLI_GPU_COMPILER)
// Four signed int8 lanes of a and b multiplied and summed into c, exact in int32.
COLI_DEVICE inline int coli_dot4_i8(int a, int b, int c) {
#if defined(COLI_GPU_VENDOR_CUDA) && defined(__CUDA_ARCH__)
    return __dp4a(a, b, c);
#elif defined(__gfx906__) || defined(__gfx908__) || defined(__gfx90a__) || defined(__gfx940__) || \
    defined(__gfx941__) || defined(__gfx942__) || defined(__gfx1030__) || defined(__gfx1031__) || \
    defined(__gfx1032__) || defined(__gfx1034__) || defined(__gfx1035__) || defined(__gfx1036__)
    return __builtin_amdgcn_sdot4(a, b, c, false); // v_dot4_i32_i8, no clamping
#else
    // Portable fallback (gfx900, gfx1010, the host pass): the same exact integer sum.
    for (int k = 0; k < 4; ++k) {
        c += (int)(int8_t)(a >> (8 * k)) * (int)(int8_t)(b >> (8 * k));
    }
    return c;
#endif // dot4 selection
}

// Shuffle: every lane of a group of `width` lanes reads v from lane src_lane of its group.
template <class T> COLI_DEVICE inline T coli_shfl(T v, int src_lane, int width) {
#if defined(COLI_GPU_VENDOR_CUDA)
    return __shfl_sync(0xffffffffu, v, src_lane, width);
#else
    return __shfl(v, src_lane, width);
#endif // vendor
}

// The float whose IEEE 754 bits are u.
COLI_DEVICE inline float coli_float_from_bits(unsigned u) {
#if defined(COLI_GPU_VENDOR_CUDA) && defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
#endif // vendor
}

// Byte permute: result byte k = byte (selector nibble k & 7) of the 8-byte value {b:a} (a holds
// bytes 0..3). The PTX prmt default mode; AMD's __byte_perm has the same semantics.
COLI_DEVICE inline unsigned coli_byte_perm(unsigned a, unsigned b, unsigned selector) {
#if defined(COLI_GPU_VENDOR_CUDA) && defined(__CUDA_ARCH__)
    return __byte_perm(a, b, selector);
#else
    const unsigned long long v = ((unsigned long long)b << 32) | a;
    unsigned r = 0;
    for (int k = 0; k < 4; ++k) r |= (unsigned)((v >> (8 * ((selector >> (4 * k)) & 7))) & 0xff) << (8 * k);
    return r;
#endif // byte_perm selection
}

// Butterfly exchange within groups of `width` lanes (a power of two, at most 32): every lane of
// a group ends with the same reduction. Width 32 splits a 64-lane wavefront into two independent
// groups, so the same kernel is correct on wave32 and wave64 targets.
template <class T> COLI_DEVICE inline T coli_shfl_xor(T v, int lane_mask, int width) {
#if defined(COLI_GPU_VENDOR_CUDA)
    return __shfl_xor_sync(0xffffffffu, v, lane_mask, width);
#else
    return __shfl_xor(v, lane_mask, width);
#endif // vendor
}

// The 32 lanes of a group see each other's shared-memory writes made before this point (every
// lane of the group calls it). CUDA: the warp's barrier (its lanes may diverge); AMD: a wavefront
// runs its lanes in lockstep, so ordering the memory operations suffices.
COLI_DEVICE inline void coli_sync_lanes() {
#if defined(COLI_GPU_VENDOR_CUDA)
    __syncwarp();
#else
    __builtin_amdgcn_fence(__ATOMIC_ACQ_REL, "workgroup");
    __builtin_amdgcn_wave_barrier();
#endif // vendor
}

#if COLI_HAS_NV_TENSOR_CORES
// Tensor-core atoms (sm_80+), fragment layouts as in the PTX ISA for mma.m16n8k32 (.s8) and
// mma.m16n8k16 (.bf16), with g = lane / 4 and t = lane % 4:
//   A (16x32 s8, row-major): a[0] = row g, cols 4t..4t+3; a[1] = row g+8, same cols;
//                            a[2] = row g, cols 16+4t..; a[3] = row g+8, cols 16+4t..
//   B (32x8 s8, "col"):      b[0] = rows 4t..4t+3 of col g; b[1] = rows 16+4t.. of col g
//   A (16x16 bf16):          a[0] = row g, cols 2t,2t+1; a[1] = row g+8; a[2] = row g, cols 8+2t..;
//                            a[3] = row g+8, cols 8+2t..
//   B (16x8 bf16):           b[0] = rows 2t,2t+1 of col g; b[1] = rows 8+2t.. of col g
//   C/D (16x8, s32 or f32):  d[0] = (g, 2t), d[1] = (g, 2t+1), d[2] = (g+8, 2t), d[3] = (g+8, 2t+1)
COLI_DEVICE inline void coli_mma_s8_16x8x32(int (&d)[4], const int (&a)[4], const int (&b)[2]) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

COLI_DEVICE inline void coli_mma_bf16_16x8x16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Asynchronous 16-byte copies global -> shared (cp.async, sm_80+), bypassing registers and L1;
// a copy that is not live writes 16 zero bytes and reads nothing. Copies are committed in groups;
// coli_cp_async_wait<N>() returns once at most N of this thread's groups are still in flight.
// coli_cp_async16_first copies only the first `bytes` (0 .. 16) and zero-fills the rest.
COLI_DEVICE inline void coli_cp_async16_first(void *smem, const void *gmem, int bytes) {
    const unsigned dst = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(bytes) : "memory");
}
COLI_DEVICE inline void coli_cp_async16(void *smem, const void *gmem, bool live) { coli_cp_async16_first(smem, gmem, live ? 16 : 0); }
// A 4-byte copy (through L1: .cg takes only 16); not live writes a zero word and reads nothing.
COLI_DEVICE inline void coli_cp_async4(void *smem, const void *gmem, bool live) {
    const unsigned dst = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(gmem), "r"(live ? 4 : 0) : "memory");
}
COLI_DEVICE inline void coli_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> COLI_DEVICE inline void coli_cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }
#endif // COLI_HAS_NV_TENSOR_CORES

// Warpgroup MMA (Hopper wgmma, sm_90a code only: __CUDA_ARCH_FEAT_SM90_ALL). A kernel that uses
// these is compiled with a body only where this is 1; the host probes for it (as for mma.sync).
#if defined(COLI_GPU_VENDOR_CUDA) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define COLI_HAS_NV_WGMMA 1
#else
#define COLI_HAS_NV_WGMMA 0
#endif // wgmma

#if COLI_HAS_NV_WGMMA
// Address of a shared-memory pointer within the block's shared window.
COLI_DEVICE inline unsigned coli_shared_address(const void *smem) { return (unsigned)__cvta_generic_to_shared(smem); }

// Shared-memory operand descriptor of a K-major tile in the 128-byte swizzle layout: rows of 128
// bytes, 8-row atoms of 1024 bytes (the tile 1024-byte aligned), 16-byte chunk c of row r stored
// at chunk c ^ (r % 8) of its row. Advancing the start by 32 bytes moves one k32 step along K.
COLI_DEVICE inline unsigned long long coli_wgmma_desc_sw128(const void *smem) {
    const unsigned addr = coli_shared_address(smem);
    return (unsigned long long)((addr & 0x3FFFFu) >> 4) | (1ull << 16) | ((unsigned long long)(1024 >> 4) << 32) | (1ull << 62);
}

// Orders this thread's register writes (A fragments) before the warpgroup's next wgmma.
COLI_DEVICE inline void coli_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
COLI_DEVICE inline void coli_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> COLI_DEVICE inline void coli_wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
// Ties accumulators to this point of the program: reads placed after it (behind a wait for their
// wgmmas) are not moved above the wait by the compiler, which sees no dependence on it otherwise.
template <int N> COLI_DEVICE inline void coli_wgmma_fence_operands(int (&d)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+r"(d[i])::"memory");
}

// d += A (64 x 32 s8, registers, the m16n8k32 A layout per warp of the warpgroup: warp w holds rows
// 16w..16w+15) x B (32 x 128 s8, K-major in shared memory, desc); with accumulate 0, d = A x B (the
// accumulators overwritten, so no instruction writes them between wgmmas, which would make ptxas
// serialize them). d: per warp, for n8 block j, d[4j..4j+3] = (row g, col 8j+2t), (g, 8j+2t+1),
// (g+8, 8j+2t), (g+8, 8j+2t+1).
COLI_DEVICE inline void coli_wgmma_s8_m64n128k32(int (&d)[64], const int (&a)[4], unsigned long long desc, int accumulate = 1) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p;\n}\n"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]),
                   "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]),
                   "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]),
                   "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]),
                   "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]),
                   "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]),
                   "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]),
                   "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate));
}
// As coli_wgmma_s8_m64n128k32 with B 32 x 64 (d: n8 blocks j = 0..7).
COLI_DEVICE inline void coli_wgmma_s8_m64n64k32(int (&d)[32], const int (&a)[4], unsigned long long desc, int accumulate = 1) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p;\n}\n"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]),
                   "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]),
                   "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]),
                   "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate));
}
#endif // COLI_HAS_NV_WGMMA

// Architecture name of a device ("sm_90", "gfx90a"), written into out.
inline void coli_gpu_arch_name(const cudaDeviceProp &prop, char *out, size_t n) {
#if defined(COLI_GPU_VENDOR_HIP)
    size_t k = 0;
    for (; k + 1 < n && prop.gcnArchName[k] && prop.gcnArchName[k] != ':'; ++k) out[k] = prop.gcnArchName[k];
    if (n) out[k] = '\0';
#else
    snprintf(out, n, "sm_%d%d", prop.major, prop.minor);
#endif // vendor
}

// Whether the device has NVIDIA tensor cores usable by the compile-gated paths (sm_80 and later).
inline bool coli_gpu_has_nv_tensor_cores(const cudaDeviceProp &prop) {
#if defined(COLI_GPU_VENDOR_HIP)
    (void)prop;
    return false;
#else
    return prop.major >= 8;
#endif // vendor
}

// Whether the device can run sm_90a code (wgmma): compute capability 9.0 exactly. The host still
// probes whether the build holds such code.
inline bool coli_gpu_has_nv_wgmma(const cudaDeviceProp &prop) {
#if defined(COLI_GPU_VENDOR_HIP)
    (void)prop;
    return false;
#else
    return prop.major == 9 && prop.minor == 0;
#endif // vendor
}

// Warp size of a device as the runtime reports it (host side, for launch configuration checks).
inline int coli_gpu_warp_size(const cudaDeviceProp &prop) { return prop.warpSize; }

// ---------------------------------------------------------------------------------------------
// Overlapped launches of a stream's kernels (NVIDIA programmatic dependent launch, sm_90+).
// A kernel started by coli_launch_overlapped may begin while the kernel before it in its stream
// still runs: it may read only what no kernel writes (weights) until coli_wait_prior_grid()
// returns, which is after that kernel (and so every one before it) has finished and its writes
// are visible. Every block of such a kernel calls coli_wait_prior_grid() before it writes or
// reads anything else, or exits. coli_release_dependents() lets the next kernel's blocks start
// (they wait likewise). Elsewhere (HIP, sm_80, overlap off) these are plain ordered launches.
// ---------------------------------------------------------------------------------------------
COLI_DEVICE inline void coli_wait_prior_grid() {
#if defined(COLI_GPU_VENDOR_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif // sm_90+
}

COLI_DEVICE inline void coli_release_dependents() {
#if defined(COLI_GPU_VENDOR_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif // sm_90+
}

// Whether the device honours overlapped launches.
inline bool coli_gpu_overlaps_launches(const cudaDeviceProp &prop) {
#if defined(COLI_GPU_VENDOR_HIP)
    (void)prop;
    return false;
#else
    return prop.major >= 9;
#endif // vendor
}

template <class... Params, class... Args>
inline cudaError_t coli_launch_overlapped(bool overlap, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                                          cudaStream_t stream, Args... args) {
#if defined(COLI_GPU_VENDOR_HIP)
    (void)overlap;
    hipLaunchKernelGGL(kernel, grid, block, smem, stream, static_cast<Params>(args)...);
    return hipGetLastError();
#else
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = overlap ? 1 : 0;
    cudaLaunchConfig_t config = {};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = smem;
    config.stream = stream;
    config.attrs = attr;
    config.numAttrs = 1;
    return cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...);
#endif // vendor
}
#endif // COLI_GPU_COMPILER

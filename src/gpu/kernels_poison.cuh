// COLI_GPU_POISON's fill of kernel outputs with 0xff bytes (NaN floats, -1 codes). A kernel rather
// than a memset so that it joins a recorded launch sequence (a graph, coli_launch_graph) in order,
// like the launches around it.
#pragma once

#include "coli_compat.h"

namespace coli::gpu {

constexpr int kPoisonThreads = 256;

// An overlapped launch (coli_launch_overlapped's contract): the kernel before it may still read
// the buffer until coli_wait_prior_grid returns. p is a device allocation (4-byte aligned).
__global__ void __launch_bounds__(kPoisonThreads) poison_kernel(uint8_t *p, size_t bytes) {
    coli_release_dependents();
    coli_wait_prior_grid();
    const size_t words = bytes / 4, stride = (size_t)gridDim.x * blockDim.x;
    uint32_t *w = reinterpret_cast<uint32_t *>(p);
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < words; i += stride) w[i] = 0xffffffffu;
    if (blockIdx.x == 0 && threadIdx.x < bytes % 4) p[words * 4 + threadIdx.x] = 0xff;
}

} // namespace coli::gpu

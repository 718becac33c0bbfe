// Decoding one weight code. Shared by the CPU reference and the GPU kernels, so that a packing
// bug cannot hide in only one of them (compiled by g++, nvcc and hipcc). The CPU backend decodes
// whole 32-bit words for its vectors (src/cpu/matmul_cpu.cpp), tested bit for bit against the
// reference.
#pragma once

#include <stdint.h>

#include "coli_compat.h"

// Q4/G4: element 2j in the low nibble of byte j, 2j+1 in the high nibble; value = nibble - 8.
COLI_HD inline int coli_q4_code(const uint8_t *row, int64_t i) {
    const unsigned byte = row[i >> 1];
    return (int)((i & 1) ? (byte >> 4) : (byte & 15u)) - 8;
}

// Q2: element 4j+k in bits 2k..2k+1 of byte j; value = field - 2.
COLI_HD inline int coli_q2_code(const uint8_t *row, int64_t i) {
    return (int)((row[i >> 2] >> (2 * (i & 3))) & 3u) - 2;
}

COLI_HD inline int coli_q8_code(const uint8_t *row, int64_t i) { return (int)(int8_t)row[i]; }

// Inverse of the decoders: store code v (already in range) at element i of a zeroed row.
inline void coli_q4_store(uint8_t *row, int64_t i, int v) {
    const unsigned nib = (unsigned)(v + 8) & 15u;
    row[i >> 1] = (uint8_t)(row[i >> 1] | ((i & 1) ? (nib << 4) : nib));
}

inline void coli_q2_store(uint8_t *row, int64_t i, int v) {
    row[i >> 2] = (uint8_t)(row[i >> 2] | ((((unsigned)(v + 2)) & 3u) << (2 * (i & 3))));
}

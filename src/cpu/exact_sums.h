// Exact mode's integer dot products on the CPU, in two implementations the CPU backend picks
// between at run time (cpu::matmul) and the registry runs side by side (src/registry.cpp):
//  - exact_sums_generic.cpp: plain loops the compiler vectorises (every CPU);
//  - exact_sums_avx2.cpp: AVX2 byte multiply-adds (x86-64 CPUs that have AVX2).
// Integer sums are exact in any order, so both give the reference's int32 sums to the bit.
#pragma once

#include <cstdint>

#include "coli/coli.h"

namespace coli::cpu {

// The activation codes of rows s0 .. s0 + ns - 1 are split into P streams by position within a
// weight byte (P codes per byte: Q8 1, Q4/G4 2, Q2 4): stream k of a row holds q[P*j + k], zero-
// padded to `stream` bytes, so byte j of a packed weight row meets q[j], q[stream + j], ...
//
// The sums are "raw": a Q4/G4/Q2 code enters as its unsigned field (Q4/G4 0..15, Q2 0..3), not
// field - offset, because the AVX2 byte multiply-add takes one unsigned operand; the caller
// subtracts offset * (sum of the activation codes over the group). Q8's byte enters signed.
struct RawSumArgs {
    const uint8_t *row;   // one packed weight row
    const int8_t *q;      // the streams of activation row s0
    int64_t q_stride;     // between activation rows' streams: P * stream
    int ns;               // activation rows, 1..kMaxRows
    int64_t stream;       // bytes of a stream: ceil(I / P)
    int64_t group_bytes;  // bytes of a group in each stream: G4 gs / 2, the whole stream otherwise
    int64_t groups;       // ceil(stream / group_bytes)
    int32_t *out;         // [ns][groups]
};

using RawSumFn = void (*)(const RawSumArgs &);

// Activation rows one call takes: their weight bytes are loaded and unpacked once.
constexpr int kMaxRows = 4;

struct ExactSums {
    const char *name;
    RawSumFn q8, q4, q2; // G4 takes q4 with groups
};

const ExactSums &exact_sums_generic();
// Null where the build or the CPU has no AVX2.
const ExactSums *exact_sums_avx2();

// The raw sum of byte j of a row's fields against one activation row's streams: the scalar form
// of both implementations (the AVX2 kernels take it for the bytes past their last whole 32).
inline int32_t raw_byte_q8(uint8_t b, const int8_t *q, int64_t, int64_t j) { return q[j] * static_cast<int8_t>(b); }
inline int32_t raw_byte_q4(uint8_t b, const int8_t *q, int64_t st, int64_t j) { return q[j] * (b & 15) + q[st + j] * (b >> 4); }
inline int32_t raw_byte_q2(uint8_t b, const int8_t *q, int64_t st, int64_t j) {
    return q[j] * (b & 3) + q[st + j] * ((b >> 2) & 3) + q[2 * st + j] * ((b >> 4) & 3) + q[3 * st + j] * (b >> 6);
}
using RawByteFn = int32_t (*)(uint8_t, const int8_t *, int64_t, int64_t);

// The offset a format's raw field carries: code = field - offset.
inline int32_t raw_offset(int fmt) { return fmt == COLI_FORMAT_Q2 ? 2 : fmt == COLI_FORMAT_Q8 ? 0 : 8; }

// The exact sum from a raw one, in wrapping 32-bit arithmetic: the raw sum may pass INT32_MAX
// where the true sum does not (exact_max_inputs), and the wrapped difference is still the true sum.
inline int32_t exact_sum(int32_t raw, int32_t offset, int32_t code_sum) {
    return static_cast<int32_t>(static_cast<uint32_t>(raw) - static_cast<uint32_t>(offset) * static_cast<uint32_t>(code_sum));
}

} // namespace coli::cpu

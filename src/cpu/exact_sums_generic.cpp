// Exact mode's raw sums (exact_sums.h) as plain loops: the path of every CPU, vectorised by the
// compiler. Unsigned accumulators: the raw sums may wrap where the exact ones do not.
#include <algorithm>

#include "cpu/clones.h"
#include "cpu/exact_sums.h"

namespace coli::cpu {

namespace {

// raw[k] = sum over bytes [b0, b1) of each group of RAW_BYTE(byte, q_k streams). Inlined into
// each clone below, which compiles it for its own target.
template <RawByteFn RawByte>
inline void group_sums(const RawSumArgs &a) {
    for (int64_t g = 0; g < a.groups; ++g) {
        const int64_t b0 = g * a.group_bytes, b1 = std::min(b0 + a.group_bytes, a.stream);
        for (int k = 0; k < a.ns; ++k) {
            const int8_t *q = a.q + k * a.q_stride;
            uint32_t acc = 0;
            for (int64_t j = b0; j < b1; ++j) acc += static_cast<uint32_t>(RawByte(a.row[j], q, a.stream, j));
            a.out[k * a.groups + g] = static_cast<int32_t>(acc);
        }
    }
}

COLI_CPU_CLONES void q8_sums(const RawSumArgs &a) { group_sums<raw_byte_q8>(a); }
COLI_CPU_CLONES void q4_sums(const RawSumArgs &a) { group_sums<raw_byte_q4>(a); }
COLI_CPU_CLONES void q2_sums(const RawSumArgs &a) { group_sums<raw_byte_q2>(a); }

} // namespace

const ExactSums &exact_sums_generic() {
    static const ExactSums sums = {"generic", q8_sums, q4_sums, q2_sums};
    return sums;
}

} // namespace coli::cpu

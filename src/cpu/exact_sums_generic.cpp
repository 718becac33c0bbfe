// Exact mode's raw sums (exact_sums.h) as plain loops: the path of every CPU, vectorised by the
// compiler. Unsigned accumulators: the raw sums may wrap where the exact ones do not.
#include <algorithm>

#include "cpu/clones.h"
#include "cpu/exact_sums.h"

namespace coli::cpu {

namespace {

// raw[k] = sum over bytes [b0, b1) of FIELDS(byte, q_k streams), one pass over the bytes for all
// ns rows. Inlined into each clone below, which compiles it for its own target.
template <typename Fields>
inline void group_sums(const RawSumArgs &a, Fields fields) {
    for (int64_t g = 0; g < a.groups; ++g) {
        const int64_t b0 = g * a.group_bytes, b1 = std::min(b0 + a.group_bytes, a.stream);
        for (int k = 0; k < a.ns; ++k) {
            const int8_t *q = a.q + k * a.q_stride;
            uint32_t acc = 0;
            for (int64_t j = b0; j < b1; ++j) acc += fields(a.row[j], q, a.stream, j);
            a.out[k * a.groups + g] = static_cast<int32_t>(acc);
        }
    }
}

COLI_CPU_CLONES void q8_sums(const RawSumArgs &a) {
    group_sums(a, [](uint8_t b, const int8_t *q, int64_t, int64_t j) {
        return static_cast<uint32_t>(q[j] * static_cast<int8_t>(b));
    });
}

COLI_CPU_CLONES void q4_sums(const RawSumArgs &a) {
    group_sums(a, [](uint8_t b, const int8_t *q, int64_t st, int64_t j) {
        return static_cast<uint32_t>(q[j] * (b & 15) + q[st + j] * (b >> 4));
    });
}

COLI_CPU_CLONES void q2_sums(const RawSumArgs &a) {
    group_sums(a, [](uint8_t b, const int8_t *q, int64_t st, int64_t j) {
        return static_cast<uint32_t>(q[j] * (b & 3) + q[st + j] * ((b >> 2) & 3) + q[2 * st + j] * ((b >> 4) & 3) +
                                     q[3 * st + j] * (b >> 6));
    });
}

} // namespace

const ExactSums &exact_sums_generic() {
    static const ExactSums sums = {"generic", q8_sums, q4_sums, q2_sums};
    return sums;
}

} // namespace coli::cpu

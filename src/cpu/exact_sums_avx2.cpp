// Exact mode's raw sums (exact_sums.h) with AVX2 byte multiply-adds, for x86-64 CPUs that have
// AVX2 (checked at run time; the functions carry the target attribute, so the file needs no
// special flags). vpmaddubsw multiplies unsigned bytes by signed bytes and adds pairs into int16
// with saturation, which never engages here:
//  - Q4/G4 fields 0..15 times codes |q| <= 127: a pair <= 3810, the two nibbles' pairs <= 7620;
//  - Q2 fields 0..3: four pairs <= 3048;
//  - Q8 signed bytes as |w| (<= 128) times q with w's sign (vpsignb): a pair <= 32512 < 32767.
// vpmaddwd by ones then widens the int16 pairs to int32 lanes, exactly.
#include "cpu/exact_sums.h"

#if defined(__x86_64__) && defined(__GNUC__)

#include <immintrin.h>

#include <algorithm>

#define COLI_AVX2 __attribute__((target("avx2")))

namespace coli::cpu {

namespace {

COLI_AVX2 inline int32_t hsum(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

COLI_AVX2 inline __m256i load(const void *p) { return _mm256_loadu_si256(static_cast<const __m256i *>(p)); }

// 32 bytes of a row against one activation row's streams at byte j: int16 pair sums.
struct Q8Bytes {
    __m256i abs_w, w;
    COLI_AVX2 explicit Q8Bytes(const uint8_t *row) : abs_w(_mm256_abs_epi8(load(row))), w(load(row)) {}
    COLI_AVX2 __m256i pairs(const int8_t *q, int64_t) const { return _mm256_maddubs_epi16(abs_w, _mm256_sign_epi8(load(q), w)); }
};

struct Q4Bytes {
    __m256i lo, hi;
    COLI_AVX2 explicit Q4Bytes(const uint8_t *row) {
        const __m256i b = load(row), m = _mm256_set1_epi8(15);
        lo = _mm256_and_si256(b, m);
        hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), m);
    }
    COLI_AVX2 __m256i pairs(const int8_t *q, int64_t st) const {
        return _mm256_add_epi16(_mm256_maddubs_epi16(lo, load(q)), _mm256_maddubs_epi16(hi, load(q + st)));
    }
};

struct Q2Bytes {
    __m256i f[4];
    COLI_AVX2 explicit Q2Bytes(const uint8_t *row) {
        const __m256i b = load(row), m = _mm256_set1_epi8(3);
        f[0] = _mm256_and_si256(b, m);
        f[1] = _mm256_and_si256(_mm256_srli_epi16(b, 2), m);
        f[2] = _mm256_and_si256(_mm256_srli_epi16(b, 4), m);
        f[3] = _mm256_and_si256(_mm256_srli_epi16(b, 6), m);
    }
    COLI_AVX2 __m256i pairs(const int8_t *q, int64_t st) const {
        const __m256i a = _mm256_add_epi16(_mm256_maddubs_epi16(f[0], load(q)), _mm256_maddubs_epi16(f[1], load(q + st)));
        const __m256i b = _mm256_add_epi16(_mm256_maddubs_epi16(f[2], load(q + 2 * st)),
                                           _mm256_maddubs_epi16(f[3], load(q + 3 * st)));
        return _mm256_add_epi16(a, b);
    }
};

// acc[k] += the int32 pair sums of activation row k over the whole 32-byte chunks of [j, j1):
// each chunk of the row is loaded and unpacked once for all NS rows.
template <typename Bytes, int NS>
COLI_AVX2 inline void accumulate(const RawSumArgs &a, int64_t j, int64_t j1, __m256i *acc) {
    const __m256i ones = _mm256_set1_epi16(1);
    for (; j + 32 <= j1; j += 32) {
        const Bytes bytes(a.row + j);
        for (int k = 0; k < NS; ++k)
            acc[k] = _mm256_add_epi32(acc[k], _mm256_madd_epi16(bytes.pairs(a.q + k * a.q_stride + j, a.stream), ones));
    }
}

template <typename Bytes, int NS, RawByteFn Tail>
COLI_AVX2 void sums_rows(const RawSumArgs &a) {
    int64_t g = 0;
    // G4 groups of whole chunks (gs a multiple of 64), four at a time: each group's lanes fold to
    // 4 and two rounds of vphaddd give the four groups' sums at once, which a full horizontal sum
    // per group (at gs = 128: every 64 bytes) would cost as much as the products.
    if (a.group_bytes % 32 == 0) {
        for (; g + 4 <= a.groups && (g + 4) * a.group_bytes <= a.stream; g += 4) {
            __m128i part[NS][4];
            for (int i = 0; i < 4; ++i) {
                __m256i acc[NS];
                for (int k = 0; k < NS; ++k) acc[k] = _mm256_setzero_si256();
                const int64_t b0 = (g + i) * a.group_bytes;
                accumulate<Bytes, NS>(a, b0, b0 + a.group_bytes, acc);
                for (int k = 0; k < NS; ++k)
                    part[k][i] = _mm_add_epi32(_mm256_castsi256_si128(acc[k]), _mm256_extracti128_si256(acc[k], 1));
            }
            for (int k = 0; k < NS; ++k) {
                const __m128i sums = _mm_hadd_epi32(_mm_hadd_epi32(part[k][0], part[k][1]), _mm_hadd_epi32(part[k][2], part[k][3]));
                _mm_storeu_si128(reinterpret_cast<__m128i *>(a.out + k * a.groups + g), sums);
            }
        }
    }
    for (; g < a.groups; ++g) {
        const int64_t b0 = g * a.group_bytes, b1 = std::min(b0 + a.group_bytes, a.stream);
        __m256i acc[NS];
        for (int k = 0; k < NS; ++k) acc[k] = _mm256_setzero_si256();
        accumulate<Bytes, NS>(a, b0, b1, acc);
        const int64_t tail = b0 + (b1 - b0) / 32 * 32;
        for (int k = 0; k < NS; ++k) {
            const int8_t *q = a.q + k * a.q_stride;
            uint32_t t = static_cast<uint32_t>(hsum(acc[k]));
            for (int64_t i = tail; i < b1; ++i) t += static_cast<uint32_t>(Tail(a.row[i], q, a.stream, i));
            a.out[k * a.groups + g] = static_cast<int32_t>(t);
        }
    }
}

template <typename Bytes, RawByteFn Tail>
void sums(const RawSumArgs &a) {
    switch (a.ns) {
    case 1: return sums_rows<Bytes, 1, Tail>(a);
    case 2: return sums_rows<Bytes, 2, Tail>(a);
    case 3: return sums_rows<Bytes, 3, Tail>(a);
    default: return sums_rows<Bytes, 4, Tail>(a);
    }
}

static_assert(kMaxRows == 4, "sums() dispatches 1..4 rows");

} // namespace

const ExactSums *exact_sums_avx2() {
    static const ExactSums table = {"avx2", sums<Q8Bytes, raw_byte_q8>, sums<Q4Bytes, raw_byte_q4>, sums<Q2Bytes, raw_byte_q2>};
    static const bool has_avx2 = __builtin_cpu_supports("avx2");
    return has_avx2 ? &table : nullptr;
}

} // namespace coli::cpu

#else // not x86-64 GCC/Clang

namespace coli::cpu {
const ExactSums *exact_sums_avx2() { return nullptr; }
} // namespace coli::cpu

#endif

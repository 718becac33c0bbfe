// The numerics contract's scalar operations (docs/numerics.md), ONE implementation compiled for
// the host (CPU reference and CPU backend) and the devices (nvcc, hipcc). Every float operation
// goes through coli_f*_rn, so it is rounded once, as written, on every compiler; rintf is exact.
// Never replace coli_expf by libm expf, __expf or a fast-math variant: their last bits differ
// between libraries and vendors, and exact mode would stop being bit-identical.
#pragma once

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "coli_compat.h"

// Activation scale of one row: sx = max(amax / 127, 1e-12).
COLI_HD inline float coli_act_scale(float amax) {
    const float s = coli_fdiv_rn(amax, 127.0f);
    return s > 1e-12f ? s : 1e-12f;
}

// One activation code: round half to even of x * inv, clamped to [-127, 127]; NaN -> 0.
COLI_HD inline int coli_act_code(float x, float inv) {
    const float v = rintf(coli_fmul_rn(x, inv));
    if (!(v == v)) return 0;
    if (v > 127.0f) return 127;
    if (v < -127.0f) return -127;
    return (int)v;
}

COLI_HD inline float coli_bits_to_float(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

// exp(x) in float32 from +, *, rint and exponent bits only.
//   n = rint(x * log2(e)), r = x - n*ln2 (Cody-Waite: ln2 = LN2_HI + LN2_LO, n*LN2_HI exact),
//   exp(r) by its Taylor polynomial to r^7 (|r| <= 0.347: truncation below 6e-9 relative),
//   times 2^n assembled in the exponent field.
// Results below FLT_MIN flush to +0 (x < -87.33654), so no device denormal mode can matter;
// x > 88.72283 gives +inf; NaN propagates. Accuracy: docs/numerics.md (measured in the tests).
COLI_HD inline float coli_expf(float x) {
    if (!(x == x)) return x;
    if (x > 88.72283f) return coli_bits_to_float(0x7f800000u);
    if (x < -87.33654f) return 0.0f;
    const float n = rintf(coli_fmul_rn(x, 1.44269502f));
    const float ln2_hi = coli_bits_to_float(0x3f317200u); // 0.693145751953125, 9 trailing zeros
    const float ln2_lo = coli_bits_to_float(0x35bfbe8eu); // 1.42860677e-6
    float r = coli_fadd_rn(x, -coli_fmul_rn(n, ln2_hi));
    r = coli_fadd_rn(r, -coli_fmul_rn(n, ln2_lo));
    float p = 1.98412698e-4f;                           // 1/5040
    p = coli_fadd_rn(coli_fmul_rn(p, r), 1.38888889e-3f); // 1/720
    p = coli_fadd_rn(coli_fmul_rn(p, r), 8.33333377e-3f); // 1/120
    p = coli_fadd_rn(coli_fmul_rn(p, r), 4.16666679e-2f); // 1/24
    p = coli_fadd_rn(coli_fmul_rn(p, r), 0.166666672f);   // 1/6
    p = coli_fadd_rn(coli_fmul_rn(p, r), 0.5f);
    p = coli_fadd_rn(coli_fmul_rn(p, r), 1.0f);
    p = coli_fadd_rn(coli_fmul_rn(p, r), 1.0f);
    int e = (int)n;
    if (e > 127) { // 2^128 is not a float: take one factor 2 into p (exact)
        p = coli_fmul_rn(p, 2.0f);
        e -= 1;
    }
    // x >= -87.33654 keeps n >= -126, so 2^n is a normal float here.
    return coli_fmul_rn(p, coli_bits_to_float((uint32_t)(e + 127) << 23));
}

// SiLU as the contract writes it: g / (1 + exp(-g)).
COLI_HD inline float coli_silu(float g) {
    return coli_fdiv_rn(g, coli_fadd_rn(1.0f, coli_expf(-g)));
}

// Expert MLP hidden value h = silu(g) * u.
COLI_HD inline float coli_swiglu(float g, float u) { return coli_fmul_rn(coli_silu(g), u); }

// Quantize one activation row of I values into q; returns its scale sx. amax ignores NaN (NaN
// codes are 0) so that every backend agrees even on bad input.
COLI_HD inline float coli_quantize_row(const float *x, int64_t I, int8_t *q) {
    float amax = 0.0f;
    for (int64_t i = 0; i < I; ++i) {
        const float a = fabsf(x[i]);
        amax = a > amax ? a : amax;
    }
    const float sx = coli_act_scale(amax);
    const float inv = coli_fdiv_rn(1.0f, sx);
    for (int64_t i = 0; i < I; ++i) q[i] = (int8_t)coli_act_code(x[i], inv);
    return sx;
}

// Exact-mode epilogues. Per-row formats: y = ((float)acc * scale) * sx.
COLI_HD inline float coli_exact_row_output(int32_t acc, float scale, float sx) {
    return coli_fmul_rn(coli_fmul_rn((float)acc, scale), sx);
}

// G4: t starts at +0 and takes t + (float)acc_g * scale_g for g = 0, 1, ... in order; y = t * sx.
// The group's product, rounded once (kernels that make the products apart from the in-order sum).
COLI_HD inline float coli_exact_group_product(int32_t acc_g, float scale_g) { return coli_fmul_rn((float)acc_g, scale_g); }
COLI_HD inline float coli_exact_group_step(float t, int32_t acc_g, float scale_g) {
    return coli_fadd_rn(t, coli_exact_group_product(acc_g, scale_g));
}

// (float)v for |v| <= 2^22 without an int -> float conversion: the bits 0x4B400000 + v are the
// float 1.5 * 2^23 + v exactly (the exponent stays 2^23 up to v = 2^22, where the carry gives 2^24,
// still the exact value), and subtracting 1.5 * 2^23 is exact. Why: NVIDIA's sm_80 / sm_90 convert
// at 16 per clock and multiprocessor against 128 float additions, and the warpgroup kernel's G4
// epilogue converts every accumulator at every group end.
constexpr int32_t kSmallIntToFloatMax = 1 << 22;
COLI_HD inline float coli_small_int_to_float(int32_t v) {
    return coli_fadd_rn(coli_bits_to_float(0x4B400000u + (uint32_t)v), -12582912.0f);
}

// coli_exact_group_step for |acc_g| <= kSmallIntToFloatMax: the same result.
COLI_HD inline float coli_exact_group_step_small(float t, int32_t acc_g, float scale_g) {
    return coli_fadd_rn(t, coli_fmul_rn(coli_small_int_to_float(acc_g), scale_g));
}

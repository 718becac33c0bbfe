// Quantizers (float32 -> format) and dequantizers (format -> float32). docs/formats.md.
#pragma once

#include <cstdint>

#include "formats/layout.h"

namespace coli {

// weights: L.weight_bytes, scales: L.scale_count floats. Every input must be finite.
void quantize(const Layout &L, const float *w, uint8_t *weights, float *scales);

// w = code * scale, one float rounding per element (F32: a copy).
void dequantize(const Layout &L, const uint8_t *weights, const float *scales, float *w);

// Value of element (o, i) before scaling: the integer code (Q8/Q4/Q2/G4).
int weight_code(const Layout &L, const uint8_t *weights, int64_t o, int64_t i);

// Scale that applies to element (o, i).
float weight_scale(const Layout &L, const float *scales, int64_t o, int64_t i);

} // namespace coli

// Strict parsing of the environment variables the library reads (docs/configuration.md).
// A malformed value is an error naming the variable, never a silent default.
#pragma once

#include <string>

namespace coli {

// Reads an integer variable. Unset or empty: *value = fallback, true. Set: the whole value must be
// a decimal integer in [lo, hi], else false with the reason in *why.
bool env_int(const char *name, long lo, long hi, long fallback, long *value, std::string *why);

} // namespace coli

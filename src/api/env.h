// Strict parsing of the environment variables the library reads (docs/configuration.md).
// A malformed value is an error naming the variable, never a silent default.
#pragma once

#include <string>
#include <vector>

namespace coli {

// Reads an integer variable. Unset or empty: *value = fallback, true. Set: the whole value must be
// a decimal integer in [lo, hi], else false with the reason in *why.
bool env_int(const char *name, long lo, long hi, long fallback, long *value, std::string *why);

// Reads a comma-separated list of integers in [lo, hi] ("0,1,3"). Unset or empty: *set = false.
// Empty items, blanks, signs or anything but digits and commas are errors.
bool env_int_list(const char *name, long lo, long hi, std::vector<long> *values, bool *set, std::string *why);

// Whether a variable is set to a non-empty value.
bool env_is_set(const char *name);

} // namespace coli

// SHA-256 (FIPS 180-4), for the report's content checksum.
#pragma once

#include <string>

namespace coli::conformance {

// Lower-case hex digest of data.
std::string sha256_hex(const std::string &data);

} // namespace coli::conformance

#include "api/env.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>

namespace coli {

bool env_int(const char *name, long lo, long hi, long fallback, long *value, std::string *why) {
    const char *text = std::getenv(name);
    if (!text || !*text) {
        *value = fallback;
        return true;
    }
    // strtol would skip leading blanks: a value must be exactly the number.
    if (!std::isdigit(static_cast<unsigned char>(text[0])) && text[0] != '-' && text[0] != '+') {
        *why = std::string(name) + "='" + text + "' is not an integer in [" + std::to_string(lo) + ", " +
               std::to_string(hi) + "]";
        return false;
    }
    errno = 0;
    char *end = nullptr;
    const long v = std::strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi) {
        *why = std::string(name) + "='" + text + "' is not an integer in [" + std::to_string(lo) +
               ", " + std::to_string(hi) + "]";
        return false;
    }
    *value = v;
    return true;
}

} // namespace coli

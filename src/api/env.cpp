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

bool env_int_list(const char *name, long lo, long hi, std::vector<long> *values, bool *set, std::string *why) {
    const char *text = std::getenv(name);
    values->clear();
    *set = text && *text;
    if (!*set) return true;
    const std::string s = text;
    size_t begin = 0;
    while (true) {
        const size_t end = s.find(',', begin);
        const std::string item = s.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
        bool digits = !item.empty() && item.size() <= 9;
        for (char ch : item) digits = digits && std::isdigit(static_cast<unsigned char>(ch));
        const long v = digits ? std::strtol(item.c_str(), nullptr, 10) : -1;
        if (!digits || v < lo || v > hi) {
            *why = std::string(name) + "='" + text + "': item '" + item + "' is not an integer in [" +
                   std::to_string(lo) + ", " + std::to_string(hi) + "] (want a list such as 0,1)";
            return false;
        }
        values->push_back(v);
        if (end == std::string::npos) return true;
        begin = end + 1;
    }
}

bool env_is_set(const char *name) {
    const char *text = std::getenv(name);
    return text && *text;
}

} // namespace coli

#include "api/runtime.h"

#include <algorithm>

namespace coli {

Runtime &runtime() {
    static Runtime r;
    return r;
}

bool Runtime::has_device(int d) const {
    return std::find(devices.begin(), devices.end(), d) != devices.end();
}

void Runtime::account(int device, int64_t tensors, int64_t bytes) {
    coli_stats &s = stats[device];
    s.tensors = static_cast<uint64_t>(static_cast<int64_t>(s.tensors) + tensors);
    s.bytes = static_cast<uint64_t>(static_cast<int64_t>(s.bytes) + bytes);
}

} // namespace coli

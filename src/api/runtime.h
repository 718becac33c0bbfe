// Library state behind the C API: started devices, live tensors and resident-set counters.
#pragma once

#include <cstdint>
#include <map>
#include <shared_mutex>
#include <unordered_set>
#include <vector>

#include "coli/coli.h"
#include "formats/layout.h"
#include "ref/weights_view.h"

// The object behind a coli_tensor handle. Host tensors keep their data in the vectors.
struct coli_tensor_t {
    coli::Layout layout;
    int device = COLI_DEVICE_CPU;
    std::vector<uint8_t> weights;
    std::vector<float> scales;

    coli::WeightsView view() const { return {layout, weights.data(), scales.empty() ? nullptr : scales.data()}; }
};

namespace coli {

struct Runtime {
    // Compute calls hold it shared; everything that changes state holds it exclusively.
    std::shared_mutex mutex;
    bool initialized = false;
    std::vector<int> devices;
    std::unordered_set<const coli_tensor_t *> live;
    std::map<int, coli_stats> stats; // per device

    bool has_device(int d) const;
    bool is_live(const coli_tensor_t *t) const { return live.count(t) != 0; }
    void account(int device, int64_t tensors, int64_t bytes);
};

Runtime &runtime();

} // namespace coli

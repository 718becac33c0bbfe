// Library state behind the C API: started devices, live tensors and resident-set counters.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <shared_mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "coli/coli.h"
#include "formats/layout.h"
#include "gpu/gpu_backend.h"
#include "ref/weights_view.h"

// The object behind a coli_tensor handle. CPU tensors keep their data in the vectors, GPU
// tensors in device memory.
struct coli_tensor_t {
    coli::Layout layout;
    int device = COLI_DEVICE_CPU;
    std::vector<uint8_t> weights;
    std::vector<float> scales;
    coli::gpu::DeviceTensor *device_tensor = nullptr;
    std::atomic<int> pending_tickets{0}; // issued, not yet taken asynchronous groups that read it

    coli_tensor_t() = default;
    coli_tensor_t(const coli_tensor_t &) = delete;
    coli_tensor_t &operator=(const coli_tensor_t &) = delete;
    ~coli_tensor_t() { // device memory goes with the handle, on every path
        std::string why;
        if (device_tensor) coli::gpu::tensor_destroy(device_tensor, &why);
    }

    coli::WeightsView view() const { return {layout, weights.data(), scales.empty() ? nullptr : scales.data()}; }
};

// An issued asynchronous expert group.
struct coli_group_ticket_t {
    int device = COLI_DEVICE_CPU;
    coli::gpu::GroupTicket *gpu_ticket = nullptr; // GPU: the enqueued work
    std::vector<float> y;                         // CPU: the result, computed at issue
    std::vector<coli_tensor_t *> tensors;         // whose pending_tickets it holds
};

namespace coli {

struct Runtime {
    // Compute calls hold it shared; everything that changes state holds it exclusively.
    std::shared_mutex mutex;
    bool initialized = false;
    std::vector<int> devices;
    std::unordered_set<const coli_tensor_t *> live;
    std::unordered_set<const coli_group_ticket_t *> tickets;
    std::map<int, coli_stats> stats; // per device

    bool has_device(int d) const;
    bool is_live(const coli_tensor_t *t) const { return live.count(t) != 0; }
    void account(int device, int64_t tensors, int64_t bytes);
};

Runtime &runtime();

} // namespace coli

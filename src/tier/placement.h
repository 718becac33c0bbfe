// The expert tier's placement policy, pure host code (unit-tested without a GPU):
// budget clamp per device, hottest-first order from a usage profile, optional fill, and whole-
// expert assignment to the least-loaded device that can hold it. docs/expert-tier.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace coli::tier {

using ExpertKey = std::pair<int, int>; // (layer, expert)

// ---- usage profile (PIN=<file>) ------------------------------------------------------------

// How often each expert was routed. Text format, one expert per line, '#' starts a comment:
//   # colibri pin profile v1
//   <layer> <expert> <count>
struct Profile {
    std::map<ExpertKey, uint64_t> counts;
};

// Strict: three non-negative integers per line, layer < layers, expert < experts, no duplicates;
// an error names the file and line.
bool parse_profile(const std::string &text, const std::string &file, int layers, int experts, Profile *out,
                   std::string *why);
bool read_profile(const std::string &path, int layers, int experts, Profile *out, std::string *why);
std::string format_profile(const Profile &p);

// Experts in placement order: recorded heat first (count descending, then layer, expert); with
// fill, then every expert without recorded heat in (layer, expert) order.
std::vector<ExpertKey> placement_order(const Profile &p, int layers, int experts, bool fill);

// ---- budget and assignment ---------------------------------------------------------------------

struct DeviceCapacity {
    int device = 0;
    uint64_t free_bytes = 0;  // free VRAM at start-up
    uint64_t dense_bytes = 0; // projected dense resident set
};

struct Budget {
    bool automatic = false;  // CUDA_EXPERT_GB=auto
    uint64_t requested = 0;  // bytes, total over all devices (when not automatic)
    uint64_t reserve = 2000000000ull; // CUDA_RESERVE_GB per device (GB = 10^9 bytes, as the variables)
};

struct DevicePlan {
    int device = 0;
    uint64_t cap = 0;      // free - dense - reserve (0 when negative)
    uint64_t assigned = 0; // expert bytes placed here
    int experts = 0;
};

struct Plan {
    uint64_t requested = 0, effective = 0; // total budget before and after the clamp
    std::vector<DevicePlan> devices;
    std::map<ExpertKey, int> device_of;    // placed experts only
    std::vector<std::string> log;          // the start-up lines explaining the budget
};

// Clamps the budget and assigns experts in order, each whole, to the least-loaded device (by
// assigned bytes; ties to the lower ordinal) that can hold it within its cap and the total;
// an expert that fits nowhere stays on the CPU and later ones are still tried.
Plan plan_placement(const std::vector<DeviceCapacity> &devices, const Budget &budget,
                    const std::vector<ExpertKey> &order, uint64_t expert_bytes);

} // namespace coli::tier

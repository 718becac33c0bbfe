#include "tier/placement.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace coli::tier {

namespace {

std::string gib(uint64_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f GB", static_cast<double>(bytes) / 1e9);
    return buf;
}

bool parse_u64(const std::string &token, uint64_t *v) {
    if (token.empty() || token.size() > 19) return false;
    for (char c : token) {
        if (c < '0' || c > '9') return false;
    }
    *v = std::strtoull(token.c_str(), nullptr, 10);
    return true;
}

} // namespace

bool parse_profile(const std::string &text, const std::string &file, int layers, int experts, Profile *out,
                   std::string *why) {
    Profile p;
    std::istringstream in(text);
    std::string line;
    int lineno = 0;
    while (std::getline(in, line)) {
        ++lineno;
        const size_t hash = line.find('#');
        if (hash != std::string::npos) line.resize(hash);
        std::istringstream fields(line);
        std::vector<std::string> tok;
        for (std::string t; fields >> t;) tok.push_back(t);
        if (tok.empty()) continue;
        uint64_t l = 0, e = 0, c = 0;
        const std::string where = file + ":" + std::to_string(lineno) + ": ";
        if (tok.size() != 3 || !parse_u64(tok[0], &l) || !parse_u64(tok[1], &e) || !parse_u64(tok[2], &c)) {
            *why = where + "expected '<layer> <expert> <count>' (three non-negative integers)";
            return false;
        }
        if (l >= static_cast<uint64_t>(layers) || e >= static_cast<uint64_t>(experts)) {
            *why = where + "layer " + tok[0] + " expert " + tok[1] + " is outside the store (" + std::to_string(layers) +
                   " layers, " + std::to_string(experts) + " experts)";
            return false;
        }
        if (!p.counts.emplace(ExpertKey(static_cast<int>(l), static_cast<int>(e)), c).second) {
            *why = where + "layer " + tok[0] + " expert " + tok[1] + " appears twice";
            return false;
        }
    }
    *out = std::move(p);
    return true;
}

bool read_profile(const std::string &path, int layers, int experts, Profile *out, std::string *why) {
    std::ifstream f(path);
    if (!f) {
        *why = path + ": cannot open the pin profile";
        return false;
    }
    std::stringstream buf;
    buf << f.rdbuf();
    return parse_profile(buf.str(), path, layers, experts, out, why);
}

std::string format_profile(const Profile &p) {
    std::string s = "# colibri pin profile v1\n# layer expert count\n";
    for (const auto &[key, count] : p.counts) {
        s += std::to_string(key.first) + " " + std::to_string(key.second) + " " + std::to_string(count) + "\n";
    }
    return s;
}

std::vector<ExpertKey> placement_order(const Profile &p, int layers, int experts, bool fill) {
    std::vector<std::pair<ExpertKey, uint64_t>> hot(p.counts.begin(), p.counts.end());
    std::stable_sort(hot.begin(), hot.end(), [](const auto &a, const auto &b) { return a.second > b.second; });
    std::vector<ExpertKey> order;
    for (const auto &h : hot) order.push_back(h.first);
    if (fill) {
        for (int l = 0; l < layers; ++l)
            for (int e = 0; e < experts; ++e)
                if (!p.counts.count({l, e})) order.push_back({l, e});
    }
    return order;
}

Plan plan_placement(const std::vector<DeviceCapacity> &devices, const Budget &budget,
                    const std::vector<ExpertKey> &order, uint64_t expert_bytes) {
    Plan plan;
    uint64_t total_cap = 0;
    for (const DeviceCapacity &d : devices) {
        DevicePlan dp;
        dp.device = d.device;
        const uint64_t used = d.dense_bytes + budget.reserve;
        dp.cap = d.free_bytes > used ? d.free_bytes - used : 0;
        total_cap += dp.cap;
        plan.devices.push_back(dp);
        plan.log.push_back("device " + std::to_string(d.device) + ": free " + gib(d.free_bytes) + " - dense " +
                           gib(d.dense_bytes) + " - reserve " + gib(budget.reserve) + " = " + gib(dp.cap) + " for experts");
    }
    plan.requested = budget.automatic ? total_cap : budget.requested;
    plan.effective = std::min(plan.requested, total_cap);
    if (budget.automatic) {
        plan.log.push_back("CUDA_EXPERT_GB=auto: budget " + gib(plan.effective) + " (every device filled to its clamp)");
    } else {
        plan.log.push_back("CUDA_EXPERT_GB: requested " + gib(plan.requested) + ", after the per-device clamp " +
                           gib(plan.effective) +
                           (plan.effective < plan.requested ? " (free VRAM minus dense set minus reserve is smaller)"
                                                            : " (fits)"));
    }
    uint64_t total = 0;
    for (const ExpertKey &key : order) {
        if (total + expert_bytes > plan.effective) continue;
        DevicePlan *best = nullptr;
        for (DevicePlan &dp : plan.devices) {
            if (dp.assigned + expert_bytes > dp.cap) continue;
            if (!best || dp.assigned < best->assigned) best = &dp;
        }
        if (!best) continue;
        best->assigned += expert_bytes;
        ++best->experts;
        total += expert_bytes;
        plan.device_of[key] = best->device;
    }
    return plan;
}

} // namespace coli::tier

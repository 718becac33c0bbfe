// The conformance runner's shared pieces: one Case per measurement (parameters, metrics, status),
// the context a case family runs in, and the family registry. Every family compares a backend
// against the CPU reference and records numbers, never a bare pass/fail.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "coli/coli.h"

namespace coli::conformance {

using json = nlohmann::ordered_json;

// Float-mode bounds (docs/numerics.md).
constexpr double kFloatMaxNmse = 1e-10;
constexpr double kW4a16MaxNmse = 1e-4;

struct Context {
    int device = COLI_DEVICE_CPU; // the device under test
    std::vector<int> gpus;        // every GPU selected for this run
    bool quick = false;
    bool tensor_cores = false;    // COLI_CUDA_TC_W4A16=1 for this run
    uint64_t seed = 20261202;
    std::string work_dir = "/tmp";
    bool is_gpu() const { return device != COLI_DEVICE_CPU; }
    double float_bound() const { return is_gpu() && tensor_cores ? kW4a16MaxNmse : kFloatMaxNmse; }
};

class Recorder {
public:
    // One measured case. status: "ok", "fail" or "skipped" (with reason).
    void record(const Context &ctx, const std::string &family, const std::string &name, json params, json metrics,
                const std::string &status, double ms, const std::string &reason = "");
    void skip(const Context &ctx, const std::string &family, const std::string &name, const std::string &reason) {
        record(ctx, family, name, json::object(), json::object(), "skipped", 0.0, reason);
    }
    const json &cases() const { return cases_; }
    int passed() const { return passed_; }
    int failed() const { return failed_; }
    int skipped() const { return skipped_; }

private:
    json cases_ = json::array();
    int passed_ = 0, failed_ = 0, skipped_ = 0;
};

struct Timer {
    std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
    double ms() const { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(); }
};

// A case family: runs its cases for ctx.device, recording each.
struct Family {
    const char *name;
    const char *description;
    std::function<void(const Context &, Recorder &)> run;
};

const std::vector<Family> &families();

// Family entry points (one file each).
void run_matmul(const Context &ctx, Recorder &r);
void run_invariance(const Context &ctx, Recorder &r);
void run_expert(const Context &ctx, Recorder &r);
void run_placement(const Context &ctx, Recorder &r);
void run_fallback(const Context &ctx, Recorder &r);
void run_mtp(const Context &ctx, Recorder &r);

// Comparison metrics: bit differences against the CPU reference, and for float results the
// error against a double-precision evaluation.
json exact_metrics(const std::vector<float> &want, const std::vector<float> &got);
json float_metrics(const std::vector<double> &exact, const std::vector<float> &got, const std::vector<float> &ref);

} // namespace coli::conformance

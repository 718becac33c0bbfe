// coli-conformance: runs every case family (runner.cpp: families()) on every selected device
// against the CPU reference and writes ONE validated-format report (conformance/schema/).
//
//   coli-conformance [--devices all|best|LIST] [--family NAME[,NAME]] [--quick] [--seed N]
//                    [--report FILE | --report-dir DIR] [--list]
//
// --devices: all (default: the CPU and every visible GPU), best (GPU 0 if there is one, else the
// CPU), or a list such as -1,0 (-1 is the CPU). The report is named
// <vendor>-<device>-<arch>-<date>.json after the first GPU (or the CPU) when --report-dir is
// given. Exit status: 0 all passed (skips allowed), 1 a case failed, 2 bad usage.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <sys/utsname.h>

#include "build_info.h"
#include "build_info_vcs.h"
#include "runner.h"
#include "sha256.h"

using namespace coli::conformance;

namespace {

// A whole decimal integer in [lo, hi] (an optional leading '-'), or false.
bool parse_int(const std::string &text, long long lo, long long hi, long long *out) {
    if (text.empty() || text.size() > 19) return false;
    for (size_t k = 0; k < text.size(); ++k) {
        if (!(std::isdigit(static_cast<unsigned char>(text[k])) || (k == 0 && text[k] == '-' && text.size() > 1))) return false;
    }
    const long long v = std::strtoll(text.c_str(), nullptr, 10);
    if (v < lo || v > hi) return false;
    *out = v;
    return true;
}

std::string slug(const std::string &s) {
    std::string out;
    for (char c : s) {
        if (std::isalnum(static_cast<unsigned char>(c))) {
            out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        } else if (!out.empty() && out.back() != '-') {
            out += '-';
        }
    }
    while (!out.empty() && out.back() == '-') out.pop_back();
    return out.empty() ? "unknown" : out;
}

json device_json(const coli_device_info &d) {
    return {{"id", d.device},         {"vendor", d.vendor},       {"name", d.name},
            {"arch", d.arch},         {"memory_bytes", d.memory_bytes}, {"multiprocessors", d.multiprocessors},
            {"warp_size", d.warp_size}, {"tensor_cores", d.has_tensor_cores != 0}, {"runtime", d.runtime}};
}

json summary_of(const json &cases) {
    int passed = 0, failed = 0, skipped = 0, exact = 0, exact_identical = 0;
    double worst_nmse = 0;
    json mtp = json::object();
    uint64_t fallbacks = 0;
    for (const json &c : cases) {
        const std::string st = c["status"];
        passed += st == "ok";
        failed += st == "fail";
        skipped += st == "skipped";
        const json &m = c["metrics"];
        const bool float_mode = c["params"].contains("numerics") && c["params"]["numerics"] == "float";
        if (m.contains("bit_identical") && !float_mode) { // exact-mode bit identity
            ++exact;
            exact_identical += m["bit_identical"].get<bool>();
        }
        if (m.contains("nmse")) worst_nmse = std::max(worst_nmse, m["nmse"].get<double>());
        if (m.contains("fallbacks")) fallbacks += m["fallbacks"].get<uint64_t>();
        if (c["family"] == "mtp" && st != "skipped" && m.contains("acceptance")) {
            const json &p = c["params"];
            mtp[p["draft"].get<std::string>() + "_draft_" + p["verify"].get<std::string>() + "_verify_" +
                p["numerics"].get<std::string>()] = m["acceptance"];
        }
    }
    return {{"total", static_cast<int>(cases.size())}, {"passed", passed}, {"failed", failed}, {"skipped", skipped},
            {"exact_cases", exact}, {"exact_bit_identical", exact_identical == exact}, {"worst_float_nmse", worst_nmse},
            {"mtp_acceptance", mtp}, {"fallbacks", fallbacks}};
}

// Writes the report with its checksum: the SHA-256 of the file's own text with the checksum
// value written as 64 zeros (conformance/validate_report.py recomputes it the same way).
bool write_report(const std::string &path, json report) {
    const std::string zeros(64, '0');
    report["checksum"] = {{"algorithm", "sha256"}, {"value", zeros}};
    std::string text = report.dump(2) + "\n";
    const size_t at = text.rfind(zeros);
    text.replace(at, zeros.size(), sha256_hex(text));
    std::ofstream out(path, std::ios::binary);
    out << text;
    return static_cast<bool>(out);
}

std::string utc_now(const char *fmt) {
    char buf[32];
    const std::time_t t = std::time(nullptr);
    std::tm tm;
    gmtime_r(&t, &tm);
    std::strftime(buf, sizeof buf, fmt, &tm);
    return buf;
}

} // namespace

int main(int argc, char **argv) {
    std::string devices_arg = "all", report_path, report_dir;
    std::vector<std::string> only;
    Context base;
    bool list = false;
    std::string command;
    for (int k = 0; k < argc; ++k) command += (k ? " " : "") + std::string(argv[k]);
    for (int k = 1; k < argc; ++k) {
        const std::string a = argv[k];
        auto value = [&]() -> std::string { return k + 1 < argc ? argv[++k] : ""; };
        if (a == "--devices") devices_arg = value();
        else if (a == "--family") {
            std::stringstream ss(value());
            for (std::string f; std::getline(ss, f, ',');) only.push_back(f);
        } else if (a == "--quick") base.quick = true;
        else if (a == "--seed") {
            long long seed = 0;
            if (!parse_int(value(), 0, INT64_MAX, &seed)) {
                std::fprintf(stderr, "coli-conformance: --seed takes a non-negative integer\n");
                return 2;
            }
            base.seed = static_cast<uint64_t>(seed);
        }
        else if (a == "--report") report_path = value();
        else if (a == "--report-dir") report_dir = value();
        else if (a == "--list") list = true;
        else {
            std::fprintf(stderr, "usage: %s [--devices all|best|LIST] [--family NAME[,NAME]] [--quick] [--seed N] "
                                 "[--report FILE | --report-dir DIR] [--list]\n", argv[0]);
            return 2;
        }
    }
    for (const std::string &f : only) {
        if (std::none_of(families().begin(), families().end(), [&](const Family &x) { return f == x.name; })) {
            std::fprintf(stderr, "coli-conformance: unknown family '%s'\n", f.c_str());
            return 2;
        }
    }
    if (list) {
        for (const Family &f : families()) std::printf("%-10s %s\n", f.name, f.description);
        return 0;
    }
    // Devices: the CPU always takes part (it is the reference); GPUs as selected.
    int n_gpus = 0;
    if (coli_gpu_count(&n_gpus) != COLI_OK) n_gpus = 0;
    std::vector<int> selected;
    if (devices_arg == "all") {
        selected.push_back(COLI_DEVICE_CPU);
        for (int g = 0; g < n_gpus; ++g) selected.push_back(g);
    } else if (devices_arg == "best") {
        selected.push_back(n_gpus > 0 ? 0 : COLI_DEVICE_CPU);
    } else {
        std::stringstream ss(devices_arg);
        for (std::string d; std::getline(ss, d, ',');) {
            long long id = 0;
            if (!parse_int(d, -1, 1023, &id)) {
                std::fprintf(stderr, "coli-conformance: --devices: '%s' is not -1 (the CPU) or a GPU ordinal\n", d.c_str());
                return 2;
            }
            selected.push_back(static_cast<int>(id));
        }
        if (selected.empty()) {
            std::fprintf(stderr, "coli-conformance: --devices is empty\n");
            return 2;
        }
    }
    std::vector<int> init = {COLI_DEVICE_CPU};
    for (int d : selected) {
        if (d != COLI_DEVICE_CPU) init.push_back(d), base.gpus.push_back(d);
    }
    if (coli_init(init.data(), static_cast<int>(init.size())) != COLI_OK) {
        std::fprintf(stderr, "coli-conformance: %s\n", coli_last_error());
        return 1;
    }
    const char *tc = std::getenv("COLI_CUDA_TC_W4A16");
    base.tensor_cores = tc && std::string(tc) == "1";
    const char *tmp = std::getenv("TMPDIR");
    base.work_dir = tmp && *tmp ? tmp : "/tmp";

    json devices = json::array();
    Recorder rec;
    for (int d : selected) {
        coli_device_info info;
        if (coli_device_info_get(d, &info) != COLI_OK) {
            std::fprintf(stderr, "coli-conformance: device %d: %s\n", d, coli_last_error());
            coli_shutdown();
            return 1;
        }
        devices.push_back(device_json(info));
        Context ctx = base;
        ctx.device = d;
        std::printf("== device %d: %s %s (%s)\n", d, info.vendor, info.name, info.arch);
        for (const Family &f : families()) {
            if (!only.empty() && std::find(only.begin(), only.end(), f.name) == only.end()) continue;
            f.run(ctx, rec);
        }
    }
    coli_shutdown();

    utsname u{};
    uname(&u);
    coli_device_info cpu;
    coli_device_info_get(COLI_DEVICE_CPU, &cpu);
    std::vector<std::string> fams;
    for (const Family &f : families())
        if (only.empty() || std::find(only.begin(), only.end(), f.name) != only.end()) fams.push_back(f.name);
    const std::string commit = COLI_BUILD_COMMIT;
    json report = {
        {"schema_version", "1.0"},
        {"project", {{"name", "colibri-gpu"}, {"version", coli_version()}, {"git_commit", commit},
                     {"git_dirty", commit.find("dirty") != std::string::npos}}},
        {"date", utc_now("%Y-%m-%dT%H:%M:%SZ")},
        {"host", {{"os", u.sysname}, {"kernel", u.release}, {"machine", u.machine}, {"cpu", cpu.name},
                  {"cpu_threads", cpu.multiprocessors}}},
        {"toolchain", {{"cxx", COLI_BUILD_CXX}, {"gpu_backend", coli_gpu_backend()}, {"gpu_compiler", COLI_BUILD_GPU_COMPILER},
                       {"gpu_runtime", devices.size() > 1 ? devices.back()["runtime"] : json("")},
                       {"build_options", {{"gpu", COLI_BUILD_GPU}, {"gpu_arch", COLI_BUILD_GPU_ARCH},
                                          {"buildtype", COLI_BUILD_TYPE}, {"meson", COLI_BUILD_MESON}}},
                       {"arch_flags", COLI_BUILD_ARCH_FLAGS}}},
        {"run", {{"command", command}, {"seed", base.seed}, {"quick", base.quick}, {"families", fams},
                 {"tensor_cores_enabled", base.tensor_cores}}},
        {"devices", devices},
        {"cases", rec.cases()},
        {"summary", summary_of(rec.cases())}};
    std::printf("\n%-10s %8s %8s %8s\n", "family", "passed", "failed", "skipped");
    for (const std::string &f : fams) {
        int n[3] = {0, 0, 0};
        for (const json &c : rec.cases()) {
            if (c["family"] != f) continue;
            const std::string st = c["status"];
            ++n[st == "ok" ? 0 : st == "fail" ? 1 : 2];
        }
        std::printf("%-10s %8d %8d %8d\n", f.c_str(), n[0], n[1], n[2]);
    }
    const json &sum = report["summary"];
    std::printf("\n%d passed, %d failed, %d skipped; exact mode bit-identical: %s; worst float NMSE %.2e\n",
                sum["passed"].get<int>(), sum["failed"].get<int>(), sum["skipped"].get<int>(),
                sum["exact_bit_identical"].get<bool>() ? "yes" : "NO", sum["worst_float_nmse"].get<double>());
    if (!report_dir.empty()) {
        const json &primary = devices.back(); // the last selected device: a GPU when there is one
        report_path = report_dir + "/" + slug(primary["vendor"]) + "-" + slug(primary["name"]) + "-" + slug(primary["arch"]) +
                      "-" + utc_now("%Y-%m-%d") + ".json";
    }
    if (!report_path.empty()) {
        if (!write_report(report_path, report)) {
            std::fprintf(stderr, "coli-conformance: cannot write %s\n", report_path.c_str());
            return 1;
        }
        std::printf("report: %s\n", report_path.c_str());
    }
    return sum["failed"].get<int>() == 0 ? 0 : 1;
}

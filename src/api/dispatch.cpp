#include "api/dispatch.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <vector>

#include <sys/stat.h>

#include "loader/module_loader.h"

namespace coli::dispatch {

namespace {

void *g_symbols[sym_count];
std::atomic<bool> g_bound{false}; // set once, after g_symbols is complete
std::mutex g_bind_mutex;

std::string env_or_empty(const char *name) {
    const char *v = std::getenv(name);
    return v ? v : "";
}

bool file_exists(const std::string &path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
}

} // namespace

void *bound(Symbol s) { return g_bound.load(std::memory_order_acquire) ? g_symbols[s] : nullptr; }

coli_status bind_from_environment(bool *cpu_only, std::string *why) {
    *cpu_only = false;
    if (!COLI_HOST_DISPATCH) return COLI_OK;
    std::lock_guard<std::mutex> lock(g_bind_mutex);
    if (g_bound.load()) return COLI_OK;
    const std::string backend = env_or_empty("COLI_GPU_BACKEND"), fallback = env_or_empty("COLI_GPU_FALLBACK");
    if (backend.empty()) return COLI_OK;
    if (backend != "cuda" && backend != "hip" && backend != "auto") {
        *why = "COLI_GPU_BACKEND='" + backend + "' is not cuda, hip or auto";
        return COLI_ERR_INVALID_ARGUMENT;
    }
    if (!fallback.empty() && fallback != "cpu") {
        *why = "COLI_GPU_FALLBACK='" + fallback + "' is not cpu (or unset)";
        return COLI_ERR_INVALID_ARGUMENT;
    }
    const std::string dir = env_or_empty("COLI_BACKEND_DIR"), runtime_dir = env_or_empty("COLI_HIP_RUNTIME_DIR");
    std::vector<std::string> candidates;
    if (backend == "auto") {
        for (const char *b : {"cuda", "hip"}) {
            if (file_exists(dir + "/" + loader::module_file_name(b))) candidates.push_back(b);
        }
    } else {
        candidates.push_back(backend);
    }
    std::string reason = candidates.empty() ? "COLI_GPU_BACKEND=auto: COLI_BACKEND_DIR='" + dir + "' holds neither " +
                                                  loader::module_file_name("cuda") + " nor " + loader::module_file_name("hip")
                                            : "";
    coli_status refusal = COLI_ERR_NO_DEVICE;
    for (const std::string &b : candidates) {
        loader::LoadedModule m;
        std::string r;
        if (const coli_status st = loader::load_backend_module({b, dir, runtime_dir}, &m, &r); st != COLI_OK) {
            reason = r; // a refused module ends the search: fail closed
            refusal = st;
            break;
        }
        if (backend == "auto") { // the first module that finds a GPU
            int n = 0;
            const auto count = reinterpret_cast<decltype(&coli_gpu_count)>(m.symbols.at("coli_gpu_count"));
            if (count(&n) != COLI_OK || n < 1) {
                reason += (reason.empty() ? "" : "; ") + m.path + " finds no GPU";
                continue;
            }
        }
#define COLI_BIND_SYMBOL(name) g_symbols[sym_##name] = m.symbols.at(#name);
        COLI_ABI_SYMBOLS(COLI_BIND_SYMBOL)
#undef COLI_BIND_SYMBOL
        g_bound.store(true, std::memory_order_release);
        // Documented diagnostics line (docs/loadable-backends.md).
        std::fprintf(stderr, "[GPU] backend: %s bound (COLI_GPU_BACKEND=%s)\n", m.path.c_str(), backend.c_str());
        return COLI_OK;
    }
    if (fallback == "cpu") {
        std::fprintf(stderr, "[GPU] backend: %s; continuing on the CPU (COLI_GPU_FALLBACK=cpu)\n", reason.c_str());
        *cpu_only = true;
        return COLI_OK;
    }
    *why = reason + " (set COLI_GPU_FALLBACK=cpu to continue on the CPU instead)";
    return refusal;
}

} // namespace coli::dispatch

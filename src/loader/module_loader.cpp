#include "loader/module_loader.h"

#include "loader/abi_symbols.h"
#include "loader/module_platform.h"

namespace coli::loader {

namespace {

coli_status refuse(std::string *why, const std::string &msg) {
    *why = msg;
    return COLI_ERR_NO_DEVICE;
}

} // namespace

std::string module_file_name(const std::string &backend) { return platform::module_file_name(backend); }

coli_status load_backend_module(const ModuleConfig &c, LoadedModule *out, std::string *why) {
    if (c.backend != "cuda" && c.backend != "hip") {
        *why = "COLI_GPU_BACKEND='" + c.backend + "' is not cuda or hip";
        return COLI_ERR_INVALID_ARGUMENT;
    }
    if (!platform::is_absolute(c.dir)) {
        return refuse(why, "COLI_BACKEND_DIR must be an absolute directory (got '" + c.dir +
                               "'); modules are never looked up on the system path");
    }
    const std::string path = platform::join(c.dir, platform::module_file_name(c.backend));
    if (const std::string bad = platform::check_file(path); !bad.empty()) return refuse(why, "COLI_BACKEND_DIR: " + bad);
    LoadedModule m;
    m.path = path;
    if (c.backend == "hip") {
        if (!platform::is_absolute(c.runtime_dir)) {
            return refuse(why, std::string("COLI_HIP_RUNTIME_DIR must be an absolute directory holding ") +
                                   platform::hip_runtime_pattern() + " (got '" + c.runtime_dir + "')");
        }
        if (const coli_status st = platform::find_hip_runtime(c.runtime_dir, &m.runtime_path, why); st != COLI_OK) return st;
        if (const std::string bad = platform::check_file(m.runtime_path); !bad.empty()) return refuse(why, bad);
        void *rt = nullptr; // stays loaded: the module binds it
        if (const coli_status st = platform::open_exact(m.runtime_path, true, &rt, why); st != COLI_OK) return st;
    }
    if (const coli_status st = platform::open_exact(path, false, &m.handle, why); st != COLI_OK) return st;
    using AbiFn = int (*)();
    auto abi = reinterpret_cast<AbiFn>(platform::symbol(m.handle, "coli_abi_version"));
    if (!abi || abi() != COLI_ABI_VERSION) {
        const std::string got = abi ? std::to_string(abi()) : "none";
        platform::close(m.handle);
        return refuse(why, "refusing " + path + ": ABI version " + got + ", this host needs " + std::to_string(COLI_ABI_VERSION));
    }
#define COLI_RESOLVE(name)                                                                                        \
    if (void *sym = platform::symbol(m.handle, #name)) {                                                         \
        m.symbols[#name] = sym;                                                                                  \
    } else {                                                                                                     \
        platform::close(m.handle);                                                                               \
        return refuse(why, "refusing " + path + ": missing symbol " #name);                                      \
    }
    COLI_ABI_SYMBOLS(COLI_RESOLVE)
#undef COLI_RESOLVE
    *out = m;
    return COLI_OK;
}

} // namespace coli::loader

// Fail-closed loading of a GPU backend module (libcoli_cuda.so / libcoli_hip.so) that exports the
// C ABI. The module, and for HIP the runtime it binds (libamdhip64.so.N), are taken only from the
// configured directories, by absolute path, never from the system search path. Refused, each
// with a message: a relative or missing directory, a missing, non-regular or non-ELF file, a
// second module of the same name already loaded from elsewhere, a mapped object that is not the
// file that was checked, an ABI version or symbol set that does not match.
#pragma once

#include <map>
#include <string>

#include "coli/coli.h"

namespace coli::loader {

struct ModuleConfig {
    std::string backend;     // "cuda" or "hip"
    std::string dir;         // COLI_BACKEND_DIR: where libcoli_<backend>.so must be
    std::string runtime_dir; // COLI_HIP_RUNTIME_DIR: where libamdhip64.so.N must be (hip only)
};

struct LoadedModule {
    void *handle = nullptr;
    std::string path;                     // the exact file that was mapped
    std::string runtime_path;             // hip: the runtime that was mapped
    std::map<std::string, void *> symbols; // every ABI function
};

coli_status load_backend_module(const ModuleConfig &config, LoadedModule *out, std::string *why);

} // namespace coli::loader

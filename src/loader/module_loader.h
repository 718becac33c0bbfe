// Fail-closed loading of a GPU backend module (libcoli_cuda.so / libcoli_hip.so; on Windows
// coli_cuda.dll / coli_hip.dll) that exports the C ABI. The module, and for HIP the runtime it
// binds (libamdhip64.so.N / amdhip64_N.dll), are taken only from the
// configured directories, by absolute path, never from the system search path. Refused, each
// with a message: a relative or missing directory, a missing, non-regular or non-ELF file, a
// second module of the same name already loaded from elsewhere, a mapped object that is not the
// file that was checked, an ABI version or symbol set that does not match. The policy is here
// (module_loader.cpp), the operating system's part in module_platform_{posix,win}.cpp.
#pragma once

#include <map>
#include <string>

#include "coli/coli.h"

namespace coli::loader {

struct ModuleConfig {
    std::string backend;     // "cuda" or "hip"
    std::string dir;         // COLI_BACKEND_DIR: where the module must be
    std::string runtime_dir; // COLI_HIP_RUNTIME_DIR: where the HIP runtime must be (hip only)
};

struct LoadedModule {
    void *handle = nullptr;
    std::string path;                     // the exact file that was mapped
    std::string runtime_path;             // hip: the runtime that was mapped
    std::map<std::string, void *> symbols; // every ABI function
};

coli_status load_backend_module(const ModuleConfig &config, LoadedModule *out, std::string *why);

// The module's file name on this system: libcoli_<backend>.so or coli_<backend>.dll.
std::string module_file_name(const std::string &backend);

} // namespace coli::loader

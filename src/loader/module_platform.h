// The operating-system half of the module loader (module_loader.cpp holds the policy): file
// checks, the HIP runtime lookup and exact-path loading, for ELF/dlopen (module_platform_posix.cpp)
// and PE/LoadLibraryEx (module_platform_win.cpp). Every refusal returns COLI_ERR_NO_DEVICE with
// the reason in *why; the messages are the same on both systems where the cases are.
#pragma once

#include <string>

#include "coli/coli.h"

namespace coli::loader::platform {

bool is_absolute(const std::string &dir);
std::string join(const std::string &dir, const std::string &name);
std::string module_file_name(const std::string &backend); // libcoli_cuda.so / coli_cuda.dll
const char *hip_runtime_pattern();                          // libamdhip64.so.<major> / amdhip64_<major>.dll

// "" for a regular, readable file that starts like a loadable module, else the reason.
std::string check_file(const std::string &path);

// The single HIP runtime file in dir.
coli_status find_hip_runtime(const std::string &dir, std::string *path, std::string *why);

// Loads path itself: refused when a module of the same file name is already loaded from another
// file, or when the object mapped is not that file. global: its symbols serve later loads (the
// HIP runtime for the module).
coli_status open_exact(const std::string &path, bool global, void **handle, std::string *why);

void *symbol(void *handle, const char *name);
void close(void *handle);

} // namespace coli::loader::platform

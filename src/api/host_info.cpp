#include "api/host_info.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include <sys/utsname.h>
#include <unistd.h>

namespace coli {

namespace {

std::string cpu_model() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("model name", 0) == 0) {
            const size_t colon = line.find(':');
            if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
        }
    }
    return "unknown CPU";
}

} // namespace

void host_device_info(coli_device_info *info) {
    std::memset(info, 0, sizeof *info);
    info->device = COLI_DEVICE_CPU;
    std::snprintf(info->vendor, sizeof info->vendor, "CPU");
    std::snprintf(info->name, sizeof info->name, "%s", cpu_model().c_str());
    utsname u;
    std::snprintf(info->arch, sizeof info->arch, "%.31s", uname(&u) == 0 ? u.machine : "unknown");
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    info->multiprocessors = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
    info->memory_bytes = pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

} // namespace coli

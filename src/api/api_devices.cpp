// C API: version, lifecycle (init/shutdown), device queries, resident-set statistics.
#include <algorithm>
#include <climits>
#include <mutex>
#include <string>
#include <thread>

#include "api/dispatch.h"
#include "api/env.h"
#include "api/errors.h"
#include "api/host_info.h"
#include "api/runtime.h"
#include "cpu/matmul_cpu.h"
#include "gpu/gpu_backend.h"

using namespace coli;

namespace {

// COLI_CUDA=1 adds the GPUs of COLI_GPUS (a list) or COLI_GPU (one ordinal), default GPU 0.
coli_status devices_from_environment(std::vector<int> *devices, std::string *why) {
    long cuda = 0;
    if (!env_int("COLI_CUDA", 0, 1, 0, &cuda, why)) return COLI_ERR_INVALID_ARGUMENT;
    devices->assign(1, COLI_DEVICE_CPU);
    std::vector<long> list;
    bool list_set = false;
    long one = 0;
    if (!env_int_list("COLI_GPUS", 0, 1023, &list, &list_set, why) || !env_int("COLI_GPU", 0, 1023, 0, &one, why)) {
        return COLI_ERR_INVALID_ARGUMENT;
    }
    if (list_set && env_is_set("COLI_GPU")) {
        *why = "COLI_GPU and COLI_GPUS are both set; set one of them";
        return COLI_ERR_INVALID_ARGUMENT;
    }
    if (!cuda) {
        if (list_set || env_is_set("COLI_GPU")) {
            *why = std::string(list_set ? "COLI_GPUS" : "COLI_GPU") + " is set but COLI_CUDA is not 1: set COLI_CUDA=1 to use GPUs";
            return COLI_ERR_INVALID_ARGUMENT;
        }
        return COLI_OK;
    }
    if (!list_set) list.assign(1, one);
    for (long g : list) devices->push_back(static_cast<int>(g));
    return COLI_OK;
}

} // namespace

#ifndef COLI_VERSION_STRING
#define COLI_VERSION_STRING "unknown"
#endif // COLI_VERSION_STRING

extern "C" {

COLI_API int coli_abi_version(void) { return COLI_ABI_VERSION; }

COLI_API const char *coli_version(void) {
    COLI_FORWARD0(coli_version);
    return COLI_VERSION_STRING;
}

COLI_API const char *coli_gpu_backend(void) {
    COLI_FORWARD0(coli_gpu_backend);
    return gpu::backend_name();
}

COLI_API coli_status coli_gpu_count(int *count) {
    COLI_FORWARD(coli_gpu_count, count);
    const char *fn = __func__;
    return guarded(fn, [&] {
        if (!count) return fail(COLI_ERR_INVALID_ARGUMENT, fn, "count must not be NULL");
        std::string why;
        const coli_status st = gpu::device_count(count, &why);
        return st == COLI_OK ? COLI_OK : fail(st, fn, why);
    });
}

COLI_API coli_status coli_device_info_get(int device, coli_device_info *info) {
    COLI_FORWARD(coli_device_info_get, device, info);
    const char *fn = __func__;
    return guarded(fn, [&] {
        if (!info) return fail(COLI_ERR_INVALID_ARGUMENT, fn, "info must not be NULL");
        if (device == COLI_DEVICE_CPU) {
            host_device_info(info);
            return COLI_OK;
        }
        if (device < 0) {
            return fail(COLI_ERR_INVALID_ARGUMENT, fn,
                        "device " + std::to_string(device) + " is neither COLI_DEVICE_CPU (-1) nor a GPU ordinal");
        }
        coli_device_info tmp;
        std::string why;
        const coli_status st = gpu::device_info(device, &tmp, &why);
        if (st != COLI_OK) return fail(st, fn, why);
        *info = tmp;
        return COLI_OK;
    });
}

COLI_API coli_status coli_init(const int *devices, int count) {
    COLI_FORWARD(coli_init, devices, count);
    const char *fn = __func__;
    return guarded(fn, [&]() -> coli_status {
        Runtime &rt = runtime();
        std::unique_lock<std::shared_mutex> lock(rt.mutex);
        if (rt.initialized) {
            return fail(COLI_ERR_INVALID_ARGUMENT, fn, "already initialized; call coli_shutdown() first");
        }
        if (count < 0 || (count > 0 && !devices)) {
            return fail(COLI_ERR_INVALID_ARGUMENT, fn, "devices must hold count >= 0 entries");
        }
        std::string why;
        bool cpu_only = false; // a host build whose module was refused, with COLI_GPU_FALLBACK=cpu
        if (const coli_status st = dispatch::bind_from_environment(&cpu_only, &why); st != COLI_OK) return fail(st, fn, why);
        if (void *bound_init = dispatch::bound(dispatch::sym_coli_init)) { // a module was bound just now
            return reinterpret_cast<decltype(&coli_init)>(bound_init)(devices, count);
        }
        std::vector<int> wanted(devices, devices + count);
        if (cpu_only) {
            wanted.assign(1, COLI_DEVICE_CPU);
        } else if (wanted.empty()) {
            if (const coli_status st = devices_from_environment(&wanted, &why); st != COLI_OK) return fail(st, fn, why);
        }
        std::vector<int> gpus;
        for (size_t k = 0; k < wanted.size(); ++k) {
            const int d = wanted[k];
            if (std::count(wanted.begin(), wanted.end(), d) > 1) {
                return fail(COLI_ERR_INVALID_ARGUMENT, fn, "device " + std::to_string(d) + " listed twice");
            }
            if (d == COLI_DEVICE_CPU) continue;
            if (d < 0) {
                return fail(COLI_ERR_INVALID_ARGUMENT, fn,
                            "device " + std::to_string(d) + " is neither COLI_DEVICE_CPU (-1) nor a GPU ordinal");
            }
            coli_device_info info;
            if (const coli_status st = gpu::device_info(d, &info, &why); st != COLI_OK) {
                return fail(st, fn, "GPU " + std::to_string(d) + ": " + why);
            }
            gpus.push_back(d);
        }
        long threads = 0, fail_after = -1, tc = 0, poison = 0;
        const long hw = std::max(1u, std::thread::hardware_concurrency());
        if (!env_int("COLI_CPU_THREADS", 1, 4096, hw, &threads, &why) ||
            !env_int("COLI_GPU_FAIL_AFTER", 0, LONG_MAX, -1, &fail_after, &why) ||
            !env_int("COLI_CUDA_TC_W4A16", 0, 1, 0, &tc, &why) || !env_int("COLI_GPU_POISON", 0, 1, 0, &poison, &why)) {
            return fail(COLI_ERR_INVALID_ARGUMENT, fn, why);
        }
        gpu::Options options;
        options.fail_after = fail_after;
        options.tc_w4a16 = tc == 1;
        options.poison_outputs = poison == 1;
        if (const coli_status st = gpu::start(gpus, options, &why); st != COLI_OK) {
            gpu::stop();
            return fail(st, fn, why);
        }
        cpu::set_threads(static_cast<int>(threads));
        if (std::find(wanted.begin(), wanted.end(), COLI_DEVICE_CPU) == wanted.end()) wanted.push_back(COLI_DEVICE_CPU);
        rt.devices = wanted;
        rt.initialized = true;
        return COLI_OK;
    });
}

COLI_API coli_status coli_shutdown(void) {
    COLI_FORWARD0(coli_shutdown);
    const char *fn = __func__;
    return guarded(fn, [&]() -> coli_status {
        Runtime &rt = runtime();
        std::unique_lock<std::shared_mutex> lock(rt.mutex);
        for (const coli_group_ticket_t *t : rt.tickets) {
            if (t->gpu_ticket) gpu::expert_group_discard(t->gpu_ticket);
            delete t;
        }
        rt.tickets.clear();
        for (const coli_tensor_t *t : rt.live) delete t; // device memory too

        rt.live.clear();
        gpu::stop();
        rt.stats.clear();
        rt.devices.clear();
        rt.initialized = false;
        return COLI_OK;
    });
}

COLI_API coli_status coli_stats_get(int device, coli_stats *stats) {
    COLI_FORWARD(coli_stats_get, device, stats);
    const char *fn = __func__;
    return guarded(fn, [&] {
        if (!stats) return fail(COLI_ERR_INVALID_ARGUMENT, fn, "stats must not be NULL");
        Runtime &rt = runtime();
        std::shared_lock<std::shared_mutex> lock(rt.mutex);
        if (device != COLI_DEVICE_ALL && device != COLI_DEVICE_CPU && !rt.has_device(device)) {
            return fail(COLI_ERR_INVALID_ARGUMENT, fn,
                        "device " + std::to_string(device) + " was not started by coli_init");
        }
        coli_stats sum{0, 0};
        for (const auto &[d, s] : rt.stats) {
            if (device == COLI_DEVICE_ALL || device == d) {
                sum.tensors += s.tensors;
                sum.bytes += s.bytes;
            }
        }
        *stats = sum;
        return COLI_OK;
    });
}

} // extern "C"

// Device discovery and description through the compat runtime names (CUDA or HIP). Queries are
// not device operations: fault injection does not count them.
#pragma once

#include <cstring>
#include <string>

#include "coli_compat.h"
#include "gpu/device_context.cuh"
#include "gpu/gpu_backend.h"

namespace coli::gpu {

#define COLI_GPU_QUERY(expr, status)                                                               \
    do {                                                                                           \
        const cudaError_t coli_err_ = (expr);                                                      \
        if (coli_err_ != cudaSuccess) {                                                            \
            cudaGetLastError();                                                                    \
            *why = std::string(#expr) + ": " + runtime_error_text(coli_err_);                      \
            return (status);                                                                       \
        }                                                                                          \
    } while (0)

coli_status device_count(int *count, std::string *why) {
    *count = 0;
    int n = 0;
    COLI_GPU_QUERY(cudaGetDeviceCount(&n), COLI_ERR_NO_DEVICE);
    if (n <= 0) {
        *why = COLI_GPU_RUNTIME_NAME " runtime reports no device";
        return COLI_ERR_NO_DEVICE;
    }
    *count = n;
    return COLI_OK;
}

coli_status device_info(int ordinal, coli_device_info *info, std::string *why) {
    int n = 0;
    const coli_status st = device_count(&n, why);
    if (st != COLI_OK) return st;
    if (ordinal < 0 || ordinal >= n) {
        *why = "GPU ordinal " + std::to_string(ordinal) + " does not exist (" + std::to_string(n) +
               " device(s) visible)";
        return COLI_ERR_NO_DEVICE;
    }
    cudaDeviceProp prop;
    COLI_GPU_QUERY(cudaGetDeviceProperties(&prop, ordinal), COLI_ERR_DEVICE);
    int runtime = 0, driver = 0;
    COLI_GPU_QUERY(cudaRuntimeGetVersion(&runtime), COLI_ERR_DEVICE);
    COLI_GPU_QUERY(cudaDriverGetVersion(&driver), COLI_ERR_DEVICE);
    std::memset(info, 0, sizeof *info);
    info->device = ordinal;
    std::snprintf(info->vendor, sizeof info->vendor, "%s", COLI_GPU_VENDOR_NAME);
    std::snprintf(info->name, sizeof info->name, "%.127s", prop.name);
    coli_gpu_arch_name(prop, info->arch, sizeof info->arch);
    info->memory_bytes = prop.totalGlobalMem;
    info->warp_size = coli_gpu_warp_size(prop);
    info->multiprocessors = prop.multiProcessorCount;
    info->has_tensor_cores = coli_gpu_has_nv_tensor_cores(prop) ? 1 : 0;
    std::snprintf(info->runtime, sizeof info->runtime, "%s runtime %d, driver %d",
                  COLI_GPU_RUNTIME_NAME, runtime, driver);
    return COLI_OK;
}

} // namespace coli::gpu

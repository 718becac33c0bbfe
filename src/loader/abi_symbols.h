// Every function of the public C ABI (src/include/coli/coli.h), as an X-macro: the symbol set a
// loadable GPU backend module must export. test: loader-abi-list-matches-header.
#pragma once

#define COLI_ABI_SYMBOLS(X)                                                                                      \
    X(coli_abi_version) X(coli_version) X(coli_gpu_backend) X(coli_status_name) X(coli_last_error)               \
    X(coli_format_sizes) X(coli_quantize) X(coli_dequantize) X(coli_init) X(coli_shutdown) X(coli_gpu_count)     \
    X(coli_device_info_get) X(coli_tensor_upload) X(coli_tensor_update) X(coli_tensor_free)                       \
    X(coli_tensor_describe) X(coli_matmul) X(coli_expert_mlp) X(coli_expert_group) X(coli_expert_group_issue)     \
    X(coli_expert_group_take) X(coli_stats_get) X(coli_store_write_random) X(coli_tier_open)                     \
    X(coli_tier_forward) X(coli_tier_shared_expert) X(coli_tier_expert_device) X(coli_tier_info_get)             \
    X(coli_tier_profile_write) X(coli_tier_close)

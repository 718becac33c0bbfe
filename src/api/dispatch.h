// Binding a GPU backend module at run time. In a host build (gpu=none with backend_modules, the
// core compiled with COLI_HOST_DISPATCH=1) coli_init binds the module that COLI_GPU_BACKEND names
// through the fail-closed loader (src/loader/module_loader.h), and from then on every C ABI
// function forwards to the module's (COLI_FORWARD, the first line of each). The binding lasts for
// the process: a module is never unloaded. Other builds compile COLI_FORWARD to nothing.
// docs/loadable-backends.md.
#pragma once

#include <string>

#include "coli/coli.h"
#include "loader/abi_symbols.h"

#ifndef COLI_HOST_DISPATCH
#define COLI_HOST_DISPATCH 0
#endif

namespace coli::dispatch {

enum Symbol : int {
#define COLI_DISPATCH_SYMBOL(name) sym_##name,
    COLI_ABI_SYMBOLS(COLI_DISPATCH_SYMBOL)
#undef COLI_DISPATCH_SYMBOL
    sym_count
};

// The bound module's function, or nullptr while no module is bound.
void *bound(Symbol s);

// coli_init's first step in a host build: binds the module COLI_GPU_BACKEND names (cuda, hip or
// auto; unset: none). A refusal is an error, unless COLI_GPU_FALLBACK=cpu allows the host to go on
// without a GPU: then *cpu_only is set and a diagnostics line gives the reason.
coli_status bind_from_environment(bool *cpu_only, std::string *why);

template <class... T> inline void unused(const T &...) {}

} // namespace coli::dispatch

#if COLI_HOST_DISPATCH
#define COLI_FORWARD(name, ...)                                                                                  \
    do {                                                                                                         \
        if (void *coli_fn_ = ::coli::dispatch::bound(::coli::dispatch::sym_##name))                             \
            return reinterpret_cast<decltype(&name)>(coli_fn_)(__VA_ARGS__);                                    \
    } while (0)
#define COLI_FORWARD0(name)                                                                                      \
    do {                                                                                                         \
        if (void *coli_fn_ = ::coli::dispatch::bound(::coli::dispatch::sym_##name))                             \
            return reinterpret_cast<decltype(&name)>(coli_fn_)();                                                \
    } while (0)
#else
#define COLI_FORWARD(name, ...) ::coli::dispatch::unused(__VA_ARGS__)
#define COLI_FORWARD0(name) ((void)0)
#endif

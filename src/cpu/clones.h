// GCC/Clang function multi-versioning for the CPU backend's loops: an AVX2 clone chosen at load
// time where the CPU has it, plus the baseline, both compiled from the same plain C++.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#define COLI_CPU_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define COLI_CPU_CLONES
#endif // x86-64 Linux

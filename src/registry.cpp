#include "registry.h"

#include "cpu/matmul_cpu.h"
#include "ref/matmul_ref.h"

namespace coli {

const std::vector<MatmulVariant> &matmul_variants() {
    static const std::vector<MatmulVariant> variants = {
        {"ref", "CPU reference: plain loops in the contract's order (src/ref/matmul_ref.cpp)", ref::matmul, true},
        {"cpu_backend", "CPU backend: blocks of 32 output rows, float mode decoded in transposed chunks, "
                        "exact sums by AVX2 kernels where the CPU has AVX2, threads (src/cpu/matmul_cpu.cpp)",
         cpu::matmul, false},
        {"cpu_generic", "CPU backend with exact mode's compiler-vectorised sums, the path of CPUs without "
                        "AVX2 (src/cpu/exact_sums_generic.cpp)",
         cpu::matmul_generic, false},
    };
    return variants;
}

} // namespace coli

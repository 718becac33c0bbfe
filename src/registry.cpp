#include "registry.h"

#include "cpu/matmul_cpu.h"
#include "ref/matmul_ref.h"

namespace coli {

const std::vector<MatmulVariant> &matmul_variants() {
    static const std::vector<MatmulVariant> variants = {
        {"ref", "CPU reference: plain loops in the contract's order (src/ref/matmul_ref.cpp)", ref::matmul, true},
        {"cpu_backend", "CPU backend: blocks of 32 output rows, float mode decoded in transposed chunks, "
                        "AVX2 clone, threads (src/cpu/matmul_cpu.cpp)",
         cpu::matmul, false},
    };
    return variants;
}

} // namespace coli

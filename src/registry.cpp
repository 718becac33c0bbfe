#include "registry.h"

#include "cpu/matmul_cpu.h"
#include "ref/matmul_ref.h"

namespace coli {

const std::vector<MatmulVariant> &matmul_variants() {
    static const std::vector<MatmulVariant> variants = {
        {"ref", "CPU reference: plain loops in the contract's order (src/ref/matmul_ref.cpp)", ref::matmul, true},
        {"cpu_rows8", "CPU backend: 8 output rows per block, transposed decode, AVX2 clone, threads "
                      "(src/cpu/matmul_cpu.cpp)",
         cpu::matmul, false},
    };
    return variants;
}

} // namespace coli

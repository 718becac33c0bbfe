// Contract tests of the host dispatch (src/api/dispatch.h), one case per process since a bound
// module stays bound: coli-host-dispatch-test CASE DIR, with DIR a fixture module directory, or
// coli-host-dispatch-test real BACKEND DIR RUNTIME_DIR [GPU] for a real module, which must then
// compute exact results identical to this host's own CPU reference. Exit 0 when the host behaves
// as the case requires, 1 otherwise.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "coli/coli.h"
#include "ref/expert_ref.h"
#include "ref/matmul_ref.h"
#include "testing/test_data.h"

namespace {

bool contains(const char *text, const std::string &part) { return text && std::string(text).find(part) != std::string::npos; }

bool check(bool ok, const char *what) {
    std::printf("%s: %s\n", what, ok ? "ok" : "FAILED");
    return ok;
}

void set(const char *name, const std::string &value) { setenv(name, value.c_str(), 1); }

// A CPU matmul through the public API, exact bits against the reference linked into this host.
bool cpu_matmul_matches() {
    using namespace coli::testing;
    const Quantized q = random_quantized(COLI_FORMAT_Q4, 33, 64, 0, 5);
    const std::vector<float> x = random_normal(2 * 64, 6);
    std::vector<float> want(2 * 33), got(2 * 33, -1.0f);
    coli::ref::matmul(q.view(), x.data(), want.data(), 2, COLI_NUMERICS_EXACT);
    coli_tensor t = nullptr;
    if (coli_tensor_upload(&t, COLI_FORMAT_Q4, 33, 64, 0, q.weights.data(), q.scales.data(), COLI_DEVICE_CPU) != COLI_OK) return false;
    const bool ok = coli_matmul(t, got.data(), x.data(), 2, COLI_NUMERICS_EXACT) == COLI_OK &&
                    count_bit_differences(want.data(), got.data(), got.size()) == 0;
    coli_tensor_free(t);
    return ok;
}

// The real module on `device`: an exact matmul and an exact expert group of 3 experts, bit for
// bit against this host's reference.
bool real_module_matches(int device) {
    using namespace coli::testing;
    const int64_t D = 256, F = 96;
    std::vector<Quantized> mats;
    for (int k = 0; k < 9; ++k) mats.push_back(random_quantized(COLI_FORMAT_Q4, k % 3 == 2 ? D : F, k % 3 == 2 ? F : D, 0, 40 + k));
    std::vector<coli_expert> experts(3);
    std::vector<coli::ExpertView> views;
    bool ok = true;
    for (int e = 0; e < 3; ++e) {
        coli_tensor *slots[3] = {&experts[e].gate, &experts[e].up, &experts[e].down};
        for (int k = 0; k < 3; ++k) {
            const Quantized &q = mats[3 * e + k];
            ok = ok && coli_tensor_upload(slots[k], COLI_FORMAT_Q4, q.L.O, q.L.I, 0, q.weights.data(), q.scales.data(),
                                          device) == COLI_OK;
        }
        views.push_back({mats[3 * e].view(), mats[3 * e + 1].view(), mats[3 * e + 2].view()});
    }
    if (!ok) return check(false, coli_last_error());
    const std::vector<int64_t> rows = {2, 0, 3};
    const std::vector<float> x = random_normal(5 * D, 7);
    std::vector<float> want(5 * F), got(5 * F, -1.0f);
    coli::ref::matmul(mats[0].view(), x.data(), want.data(), 5, COLI_NUMERICS_EXACT);
    ok = check(coli_matmul(experts[0].gate, got.data(), x.data(), 5, COLI_NUMERICS_EXACT) == COLI_OK &&
                   count_bit_differences(want.data(), got.data(), got.size()) == 0,
               "real module: exact matmul equals the host's reference");
    std::vector<float> gwant(5 * D), ggot(5 * D, -1.0f);
    coli::ref::expert_group(coli::ref::matmul, views.data(), 3, rows.data(), x.data(), nullptr, nullptr, gwant.data(), 5,
                            COLI_NUMERICS_EXACT);
    ok = check(coli_expert_group(experts.data(), 3, rows.data(), x.data(), nullptr, nullptr, ggot.data(), 5,
                                 COLI_NUMERICS_EXACT) == COLI_OK &&
                   count_bit_differences(gwant.data(), ggot.data(), ggot.size()) == 0,
               "real module: exact expert group equals the host's reference") && ok;
    for (const coli_expert &e : experts) {
        coli_tensor_free(e.gate);
        coli_tensor_free(e.up);
        coli_tensor_free(e.down);
    }
    return ok;
}

} // namespace

int main(int argc, char **argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s CASE DIR | real BACKEND DIR RUNTIME_DIR [GPU]\n", argv[0]);
        return 2;
    }
    const std::string which = argv[1], dir = argv[2];
    for (const char *v : {"COLI_GPU_BACKEND", "COLI_GPU_FALLBACK", "COLI_BACKEND_DIR", "COLI_HIP_RUNTIME_DIR", "COLI_CUDA",
                          "COLI_GPU", "COLI_GPUS"}) {
        unsetenv(v);
    }
    bool ok = true;
    if (which == "unset") { // no COLI_GPU_BACKEND: the host's own CPU backend
        ok = check(coli_init(nullptr, 0) == COLI_OK, "init") && check(std::string(coli_gpu_backend()) == "none", "backend none") &&
             check(cpu_matmul_matches(), "CPU matmul");
    } else if (which == "bind") { // an explicit backend: every call goes to the module
        set("COLI_GPU_BACKEND", "cuda");
        set("COLI_BACKEND_DIR", dir);
        ok = check(coli_init(nullptr, 0) == COLI_OK, "init forwarded") &&
             check(std::string(coli_gpu_backend()) == "fixture", "coli_gpu_backend from the module") &&
             check(coli_matmul(nullptr, nullptr, nullptr, 1, 0) == COLI_OK, "coli_matmul forwarded (the host refuses NULL)") &&
             check(contains(coli_last_error(), "fixture"), "coli_last_error from the module");
    } else if (which == "refused") { // a refused module is an error, and the host stays as it was
        set("COLI_GPU_BACKEND", "cuda");
        set("COLI_BACKEND_DIR", dir);
        ok = check(coli_init(nullptr, 0) == COLI_ERR_NO_DEVICE, "init refused") &&
             check(contains(coli_last_error(), "ABI version 2") && contains(coli_last_error(), "COLI_GPU_FALLBACK=cpu"),
                   "message names the reason and the fallback switch") &&
             check(std::string(coli_gpu_backend()) == "none", "nothing bound") &&
             check(coli_tensor_upload(nullptr, 0, 1, 1, 0, nullptr, nullptr, COLI_DEVICE_CPU) == COLI_ERR_INVALID_ARGUMENT,
                   "calls stay with the host");
    } else if (which == "fallback") { // refused, but the user allowed the CPU: GPU requests are dropped
        set("COLI_GPU_BACKEND", "cuda");
        set("COLI_BACKEND_DIR", dir);
        set("COLI_GPU_FALLBACK", "cpu");
        set("COLI_CUDA", "1");
        ok = check(coli_init(nullptr, 0) == COLI_OK, "init continues on the CPU") &&
             check(std::string(coli_gpu_backend()) == "none", "nothing bound") && check(cpu_matmul_matches(), "CPU matmul");
    } else if (which == "auto-none") { // auto with no module in the directory
        set("COLI_GPU_BACKEND", "auto");
        set("COLI_BACKEND_DIR", dir);
        ok = check(coli_init(nullptr, 0) == COLI_ERR_NO_DEVICE && contains(coli_last_error(), "holds neither"), "refused");
        set("COLI_GPU_FALLBACK", "cpu");
        ok = check(coli_init(nullptr, 0) == COLI_OK && cpu_matmul_matches(), "with COLI_GPU_FALLBACK=cpu: the CPU") && ok;
    } else if (which == "auto-nogpu") { // auto whose only module finds no GPU
        set("COLI_GPU_BACKEND", "auto");
        set("COLI_BACKEND_DIR", dir);
        ok = check(coli_init(nullptr, 0) == COLI_ERR_NO_DEVICE && contains(coli_last_error(), "finds no GPU"), "refused");
        set("COLI_GPU_FALLBACK", "cpu");
        ok = check(coli_init(nullptr, 0) == COLI_OK && std::string(coli_gpu_backend()) == "none",
                   "with COLI_GPU_FALLBACK=cpu: the CPU") && ok;
    } else if (which == "auto-good") { // auto binds the first module that finds a GPU
        set("COLI_GPU_BACKEND", "auto");
        set("COLI_BACKEND_DIR", dir);
        ok = check(coli_init(nullptr, 0) == COLI_OK && std::string(coli_gpu_backend()) == "fixture", "bound");
    } else if (which == "bad-values") { // strict values, nothing bound
        set("COLI_GPU_BACKEND", "vulkan");
        set("COLI_BACKEND_DIR", dir);
        ok = check(coli_init(nullptr, 0) == COLI_ERR_INVALID_ARGUMENT && contains(coli_last_error(), "not cuda, hip or auto"),
                   "COLI_GPU_BACKEND=vulkan");
        set("COLI_GPU_BACKEND", "cuda");
        set("COLI_GPU_FALLBACK", "maybe");
        ok = check(coli_init(nullptr, 0) == COLI_ERR_INVALID_ARGUMENT && contains(coli_last_error(), "COLI_GPU_FALLBACK"),
                   "COLI_GPU_FALLBACK=maybe") && ok;
        ok = check(std::string(coli_gpu_backend()) == "none", "nothing bound") && ok;
    } else if (which == "real" && argc >= 5) { // real BACKEND DIR RUNTIME_DIR [GPU]
        const int gpu = argc >= 6 ? std::atoi(argv[5]) : COLI_DEVICE_CPU;
        set("COLI_GPU_BACKEND", argv[2]);
        set("COLI_BACKEND_DIR", argv[3]);
        if (argv[4][0]) set("COLI_HIP_RUNTIME_DIR", argv[4]);
        const int devices[2] = {COLI_DEVICE_CPU, gpu};
        const bool init = coli_init(devices, gpu == COLI_DEVICE_CPU ? 1 : 2) == COLI_OK;
        if (!init) std::printf("coli_init: %s\n", coli_last_error());
        ok = check(init, "init through the module") &&
             check(std::string(coli_gpu_backend()) == argv[2], "coli_gpu_backend names the module's vendor") &&
             real_module_matches(gpu);
    } else {
        std::fprintf(stderr, "unknown case %s\n", which.c_str());
        return 2;
    }
    coli_shutdown();
    std::printf("%s: %s\n", which.c_str(), ok ? "as required" : "NOT as required");
    return ok ? 0 : 1;
}

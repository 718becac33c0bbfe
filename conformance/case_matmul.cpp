// Family "matmul": every format x numerics mode x shape through the C API on the device under
// test, plus every registered kernel path of that device (GPU: portable, vector, split,
// tensor_core where the shape and device take them; CPU: every host variant), against the CPU
// reference. Kernels: src/gpu/kernels_matmul.cuh, kernels_matvec.cuh, kernels_matvec_split.cuh,
// kernels_tensor_core.cuh, src/cpu/matmul_cpu.cpp.
#include "api/runtime.h"
#include "gpu/gpu_backend.h"
#include "ref/matmul_ref.h"
#include "registry.h"
#include "runner.h"
#include "testing/test_data.h"

namespace coli::conformance {

namespace {

struct Shape {
    int fmt;
    int64_t O, I, gs, S;
    bool quick;
};

// Decode and prefill rows, odd and partial-group sizes, the GLM-5 expert shapes.
const Shape kShapes[] = {
    {COLI_FORMAT_F32, 37, 101, 0, 1, true},        {COLI_FORMAT_Q8, 37, 101, 0, 3, true},
    {COLI_FORMAT_Q4, 37, 101, 0, 1, true},         {COLI_FORMAT_Q2, 37, 101, 0, 4, true},
    {COLI_FORMAT_G4, 31, 100, 32, 3, true},        {COLI_FORMAT_G4, 17, 1000, 128, 2, true},
    {COLI_FORMAT_Q4, 64, 96, 0, 24, true},         {COLI_FORMAT_Q8, 2048, 6144, 0, 1, false},
    {COLI_FORMAT_Q4, 2048, 6144, 0, 1, false},     {COLI_FORMAT_Q2, 2048, 6144, 0, 1, false},
    {COLI_FORMAT_G4, 2048, 6144, 128, 1, false},   {COLI_FORMAT_Q4, 6144, 2048, 0, 1, false},
    {COLI_FORMAT_G4, 6144, 2048, 64, 8, false},    {COLI_FORMAT_Q4, 512, 1024, 0, 64, false},
    {COLI_FORMAT_G4, 256, 1024, 32, 128, false},   {COLI_FORMAT_F32, 256, 512, 0, 64, false},
    // G4 in groups of whole 128-code chunks (the skinny kernels take those): a partial last group
    // and two grid rows, and the GLM-5 shape at 4 rows.
    {COLI_FORMAT_G4, 37, 640, 256, 11, true},      {COLI_FORMAT_G4, 2048, 6144, 128, 4, false},
};

json params_of(const Shape &c, int mode, const char *path) {
    return {{"format", format_name(c.fmt)}, {"O", c.O}, {"I", c.I}, {"gs", c.gs}, {"S", c.S},
            {"numerics", mode == COLI_NUMERICS_EXACT ? "exact" : "float"}, {"path", path}};
}

std::string name_of(const Shape &c, int mode, const char *path) {
    return std::string(format_name(c.fmt)) + " " + std::to_string(c.O) + "x" + std::to_string(c.I) + " S=" +
           std::to_string(c.S) + (mode == COLI_NUMERICS_EXACT ? " exact " : " float ") + path;
}

// One matmul on the device through one explicit kernel path, with device buffers.
coli_status run_device_path(int device, const gpu::DeviceTensor *t, const std::vector<float> &x, std::vector<float> &y,
                            int64_t S, int mode, gpu::MatmulPath path, std::string *why) {
    void *xd = nullptr, *yd = nullptr;
    coli_status st = gpu::buffer_alloc(device, x.size() * sizeof(float), &xd, why);
    if (st == COLI_OK) st = gpu::buffer_alloc(device, y.size() * sizeof(float), &yd, why);
    if (st == COLI_OK) st = gpu::buffer_write(device, xd, x.data(), x.size() * sizeof(float), why);
    if (st == COLI_OK) st = gpu::matmul_device(t, static_cast<float *>(xd), static_cast<float *>(yd), S, mode, path, why);
    if (st == COLI_OK) st = gpu::buffer_read(device, y.data(), yd, y.size() * sizeof(float), why);
    if (xd) gpu::buffer_free(device, xd);
    if (yd) gpu::buffer_free(device, yd);
    return st;
}

} // namespace

void run_matmul(const Context &ctx, Recorder &r) {
    using namespace coli::testing;
    // The tensor-core paths run as their own cases below (and inside the api cases, Q4/G4 at
    // S >= 16) where the device has them: int8 MMA (exact) always, W4A16 (float) when opted in.
    coli_device_info info{};
    if (ctx.is_gpu() && (coli_device_info_get(ctx.device, &info) != COLI_OK || !info.has_tensor_cores)) {
        r.skip(ctx, "matmul", "tensor-core path, int8 MMA (exact)", "this build or device has no tensor-core kernels");
    }
    if (ctx.is_gpu() && !gpu::w4a16_active(ctx.device)) {
        r.skip(ctx, "matmul", "tensor-core path, W4A16 (float)",
               ctx.tensor_cores ? "this build or device has no tensor-core kernels" : "COLI_CUDA_TC_W4A16 is not 1");
    }
    int k = 0;
    for (const Shape &c : kShapes) {
        ++k;
        if (ctx.quick && !c.quick) continue;
        const Quantized q = random_quantized(c.fmt, c.O, c.I, c.gs, ctx.seed + k);
        const std::vector<float> x = random_normal(static_cast<size_t>(c.S * c.I), ctx.seed + 100 + k);
        const std::vector<double> exact = matmul_double(q, x, c.S);
        coli_tensor t = nullptr;
        if (coli_tensor_upload(&t, c.fmt, c.O, c.I, c.gs, q.weights.data(), q.scales.empty() ? nullptr : q.scales.data(),
                               ctx.device) != COLI_OK) {
            r.record(ctx, "matmul", name_of(c, 0, "api"), params_of(c, 0, "api"), json::object(), "fail", 0, coli_last_error());
            continue;
        }
        for (int mode : {COLI_NUMERICS_FLOAT, COLI_NUMERICS_EXACT}) {
            if (mode == COLI_NUMERICS_EXACT && c.fmt == COLI_FORMAT_F32) continue;
            std::vector<float> want(static_cast<size_t>(c.S * c.O));
            ref::matmul(q.view(), x.data(), want.data(), c.S, mode);
            auto judge = [&](const std::vector<float> &got, bool same_order, double bound, json *m) {
                if (mode == COLI_NUMERICS_EXACT) {
                    *m = exact_metrics(want, got);
                    return (*m)["bit_identical"].get<bool>();
                }
                *m = float_metrics(exact, got, want);
                return (*m)["nmse"].get<double>() < bound && (!same_order || (*m)["differing_from_cpu_reference"] == 0);
            };
            if (!ctx.is_gpu()) { // every registered host variant (the reference itself included)
                for (const MatmulVariant &v : matmul_variants()) {
                    std::vector<float> got(want.size(), std::nanf(""));
                    Timer tm;
                    v.fn(q.view(), x.data(), got.data(), c.S, mode);
                    json m;
                    const bool ok = judge(got, true, kFloatMaxNmse, &m);
                    r.record(ctx, "matmul", name_of(c, mode, v.name), params_of(c, mode, v.name), m, ok ? "ok" : "fail", tm.ms());
                }
            }
            if (ctx.is_gpu()) { // every kernel path of the device that takes this shape
                for (gpu::MatmulPath path : gpu::matmul_paths(ctx.device, q.L, mode)) {
                    const char *name = gpu::matmul_path_name(path);
                    std::vector<float> got(want.size(), std::nanf(""));
                    std::string why;
                    Timer tm;
                    const coli_status st = run_device_path(ctx.device, t->device_tensor, x, got, c.S, mode, path, &why);
                    json m;
                    const bool ok = st == COLI_OK &&
                                    judge(got, false, path == gpu::MatmulPath::tensor_core ? kW4a16MaxNmse : kFloatMaxNmse, &m);
                    r.record(ctx, "matmul", name_of(c, mode, name), params_of(c, mode, name), m, ok ? "ok" : "fail",
                             tm.ms(), why);
                }
            }
            std::vector<float> got(want.size(), std::nanf(""));
            Timer tm;
            const coli_status st = coli_matmul(t, got.data(), x.data(), c.S, mode);
            json m;
            const bool ok = st == COLI_OK && judge(got, !ctx.is_gpu(), ctx.float_bound(), &m);
            r.record(ctx, "matmul", name_of(c, mode, "api"), params_of(c, mode, "api"), m, ok ? "ok" : "fail", tm.ms(),
                     st == COLI_OK ? "" : coli_last_error());
        }
        coli_tensor_free(t);
    }
}

} // namespace coli::conformance

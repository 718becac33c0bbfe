// C API: matmul, fused expert MLP and expert group. Everything is validated before any output
// is written; computation runs under the shared lock, so tensors cannot be freed underneath it.
#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "api/dispatch.h"
#include "api/errors.h"
#include "api/runtime.h"
#include "api/validate.h"
#include "cpu/matmul_cpu.h"
#include "ref/expert_ref.h"

using namespace coli;

namespace {

coli_status check_numerics(const char *fn, int numerics, const Layout &L, const char *name) {
    if (numerics != COLI_NUMERICS_FLOAT && numerics != COLI_NUMERICS_EXACT) {
        return fail(COLI_ERR_INVALID_ARGUMENT, fn,
                    "unknown numerics mode " + std::to_string(numerics) + " (0 float, 1 exact)");
    }
    if (numerics != COLI_NUMERICS_EXACT) return COLI_OK;
    if (L.fmt == COLI_FORMAT_F32) {
        return fail(COLI_ERR_UNSUPPORTED, fn,
                    std::string(name) + " is F32, which has no exact mode; use COLI_NUMERICS_FLOAT");
    }
    if (L.group_size() > exact_max_inputs(L.fmt)) {
        return fail(COLI_ERR_UNSUPPORTED, fn,
                    std::string(name) + ": " + std::to_string(L.group_size()) + " inputs per " +
                        (L.fmt == COLI_FORMAT_G4 ? "group" : "row") + " could overflow the int32 accumulator of exact mode (limit " +
                        std::to_string(exact_max_inputs(L.fmt)) + ")");
    }
    return COLI_OK;
}

// S rows of n floats must be addressable.
coli_status check_rows(const char *fn, int64_t S, int64_t n, const char *what) {
    size_t bytes = 0;
    if (S <= 0) return fail(COLI_ERR_INVALID_ARGUMENT, fn, std::string(what) + ": S must be positive (got " + std::to_string(S) + ")");
    if (__builtin_mul_overflow(static_cast<size_t>(S), static_cast<size_t>(n), &bytes) ||
        __builtin_mul_overflow(bytes, sizeof(float), &bytes) || bytes > static_cast<size_t>(INT64_MAX)) {
        return fail(COLI_ERR_INVALID_ARGUMENT, fn, std::string(what) + ": S=" + std::to_string(S) + " rows overflow size_t");
    }
    return COLI_OK;
}

coli_status check_expert(const char *fn, const Runtime &rt, const coli_expert &e, int numerics, int64_t *D, int *device) {
    const coli_tensor_t *ts[3] = {e.gate, e.up, e.down};
    const char *names[3] = {"gate", "up", "down"};
    for (int k = 0; k < 3; ++k) {
        if (const coli_status st = check_tensor(fn, rt, ts[k], names[k]); st != COLI_OK) return st;
        if (const coli_status st = check_numerics(fn, numerics, ts[k]->layout, names[k]); st != COLI_OK) return st;
    }
    const Layout &g = e.gate->layout, &u = e.up->layout, &d = e.down->layout;
    if (g.O != u.O || g.I != u.I || d.I != g.O || d.O != g.I) {
        return fail(COLI_ERR_INVALID_ARGUMENT, fn,
                    "mismatched expert shapes: gate [" + std::to_string(g.O) + "x" + std::to_string(g.I) + "], up [" +
                        std::to_string(u.O) + "x" + std::to_string(u.I) + "], down [" + std::to_string(d.O) + "x" +
                        std::to_string(d.I) + "]; want gate, up [F x D] and down [D x F]");
    }
    if (e.gate->device != e.up->device || e.gate->device != e.down->device) {
        return fail(COLI_ERR_INVALID_ARGUMENT, fn, "gate, up and down live on different devices");
    }
    *D = g.I;
    *device = e.gate->device;
    return COLI_OK;
}

ExpertView view_of(const coli_expert &e) { return {e.gate->view(), e.up->view(), e.down->view()}; }

gpu::Expert device_expert(const coli_expert &e) {
    return {e.gate->device_tensor, e.up->device_tensor, e.down->device_tensor};
}

coli_status gpu_failed(const char *fn, int device, coli_status st, const std::string &why) {
    return fail(st, fn, "GPU " + std::to_string(device) + ": " + why);
}

// A validated expert group: everything coli_expert_group and its async twin need.
struct Group {
    int device = COLI_DEVICE_CPU;
    int64_t D = 0, total = 0;
};

coli_status check_group(const char *fn, const Runtime &rt, const coli_expert *experts, int n_experts, const int64_t *rows,
                        const float *x, const int64_t *row_token, int64_t n_tokens, int numerics, Group *g) {
    if (n_experts <= 0) return fail(COLI_ERR_INVALID_ARGUMENT, fn, "n_experts must be positive");
    if (!experts || !rows) return fail(COLI_ERR_INVALID_ARGUMENT, fn, "experts and rows must not be NULL");
    if (!x) return fail(COLI_ERR_INVALID_ARGUMENT, fn, "x and y must not be NULL");
    int64_t D = 0, total = 0;
    int device = 0;
    for (int e = 0; e < n_experts; ++e) {
        int64_t De = 0;
        int dev = 0;
        if (const coli_status st = check_expert(fn, rt, experts[e], numerics, &De, &dev); st != COLI_OK) return st;
        if (e == 0) {
            D = De;
            device = dev;
        } else if (De != D || dev != device) {
            return fail(COLI_ERR_INVALID_ARGUMENT, fn,
                        "expert " + std::to_string(e) + " differs from expert 0 in hidden size or device");
        }
        if (rows[e] < 0 || __builtin_add_overflow(total, rows[e], &total)) {
            return fail(COLI_ERR_INVALID_ARGUMENT, fn, "rows[" + std::to_string(e) + "] is negative or the sum overflows");
        }
        if (rows[e] > 0) {
            if (const coli_status st = check_rows(fn, rows[e], experts[e].gate->layout.O, "hidden"); st != COLI_OK) return st;
        }
    }
    if (const coli_status st = check_rows(fn, n_tokens, D, "y"); st != COLI_OK) return st;
    if (total > 0) {
        if (const coli_status st = check_rows(fn, total, D, "x"); st != COLI_OK) return st;
    }
    if (device != COLI_DEVICE_CPU && (total > INT32_MAX || n_tokens > INT32_MAX)) {
        return fail(COLI_ERR_UNSUPPORTED, fn, "a GPU expert group takes at most 2^31-1 rows and tokens");
    }
    if (!row_token && n_tokens != total) {
        return fail(COLI_ERR_INVALID_ARGUMENT, fn,
                    "without row_token, n_tokens (" + std::to_string(n_tokens) + ") must equal the sum of rows (" +
                        std::to_string(total) + ")");
    }
    if (row_token) {
        for (int64_t r = 0; r < total; ++r) {
            if (row_token[r] < 0 || row_token[r] >= n_tokens) {
                return fail(COLI_ERR_INVALID_ARGUMENT, fn,
                            "row_token[" + std::to_string(r) + "] = " + std::to_string(row_token[r]) + " is outside [0, " +
                                std::to_string(n_tokens) + ")");
            }
        }
    }
    g->device = device;
    g->D = D;
    g->total = total;
    return COLI_OK;
}

gpu::GroupCall gpu_call(const coli_expert *experts, int n_experts, const int64_t *rows, const int64_t *row_token,
                        const float *row_weight, int64_t n_tokens, int numerics, const Group &g) {
    gpu::GroupCall c;
    for (int e = 0; e < n_experts; ++e) c.experts.push_back(device_expert(experts[e]));
    c.rows.assign(rows, rows + n_experts);
    if (row_token) c.row_token.assign(row_token, row_token + g.total);
    if (row_weight) c.row_weight.assign(row_weight, row_weight + g.total);
    c.n_tokens = n_tokens;
    c.D = g.D;
    c.numerics = numerics;
    return c;
}

void cpu_group(const coli_expert *experts, int n_experts, const int64_t *rows, const float *x, const int64_t *row_token,
               const float *row_weight, float *y, int64_t n_tokens, int numerics) {
    std::vector<ExpertView> views;
    views.reserve(static_cast<size_t>(n_experts));
    for (int e = 0; e < n_experts; ++e) views.push_back(view_of(experts[e]));
    ref::expert_group(cpu::matmul, views.data(), n_experts, rows, x, row_token, row_weight, y, n_tokens, numerics);
}

} // namespace

extern "C" {

COLI_API coli_status coli_matmul(coli_tensor t, float *y, const float *x, int64_t S, int numerics) {
    COLI_FORWARD(coli_matmul, t, y, x, S, numerics);
    const char *fn = __func__;
    return guarded(fn, [&]() -> coli_status {
        Runtime &rt = runtime();
        std::shared_lock<std::shared_mutex> lock(rt.mutex);
        if (const coli_status st = check_tensor(fn, rt, t, "t"); st != COLI_OK) return st;
        if (!x || !y) return fail(COLI_ERR_INVALID_ARGUMENT, fn, "x and y must not be NULL");
        if (const coli_status st = check_numerics(fn, numerics, t->layout, "t"); st != COLI_OK) return st;
        if (const coli_status st = check_rows(fn, S, t->layout.I, "x"); st != COLI_OK) return st;
        if (const coli_status st = check_rows(fn, S, t->layout.O, "y"); st != COLI_OK) return st;
        if (t->device == COLI_DEVICE_CPU) {
            cpu::matmul(t->view(), x, y, S, numerics);
            return COLI_OK;
        }
        std::string why;
        const coli_status st = gpu::matmul(t->device_tensor, x, y, S, numerics, &why);
        return st == COLI_OK ? COLI_OK : gpu_failed(fn, t->device, st, why);
    });
}

COLI_API coli_status coli_expert_mlp(const coli_expert *expert, float *y, const float *x, int64_t S, int numerics) {
    COLI_FORWARD(coli_expert_mlp, expert, y, x, S, numerics);
    const char *fn = __func__;
    return guarded(fn, [&]() -> coli_status {
        Runtime &rt = runtime();
        std::shared_lock<std::shared_mutex> lock(rt.mutex);
        if (!expert) return fail(COLI_ERR_INVALID_ARGUMENT, fn, "expert must not be NULL");
        if (!x || !y) return fail(COLI_ERR_INVALID_ARGUMENT, fn, "x and y must not be NULL");
        int64_t D = 0;
        int device = 0;
        if (const coli_status st = check_expert(fn, rt, *expert, numerics, &D, &device); st != COLI_OK) return st;
        if (const coli_status st = check_rows(fn, S, expert->gate->layout.O, "hidden"); st != COLI_OK) return st;
        if (const coli_status st = check_rows(fn, S, D, "x"); st != COLI_OK) return st;
        if (device == COLI_DEVICE_CPU) {
            ref::expert_mlp(cpu::matmul, view_of(*expert), x, y, S, numerics);
            return COLI_OK;
        }
        std::string why;
        const coli_status st = gpu::expert_mlp(device_expert(*expert), x, y, S, numerics, &why);
        return st == COLI_OK ? COLI_OK : gpu_failed(fn, device, st, why);
    });
}

COLI_API coli_status coli_expert_group(const coli_expert *experts, int n_experts, const int64_t *rows, const float *x,
                                       const int64_t *row_token, const float *row_weight, float *y, int64_t n_tokens,
                                       int numerics) {
    COLI_FORWARD(coli_expert_group, experts, n_experts, rows, x, row_token, row_weight, y, n_tokens, numerics);
    const char *fn = __func__;
    return guarded(fn, [&]() -> coli_status {
        Runtime &rt = runtime();
        std::shared_lock<std::shared_mutex> lock(rt.mutex);
        Group g;
        if (!y) return fail(COLI_ERR_INVALID_ARGUMENT, fn, "x and y must not be NULL");
        if (const coli_status st = check_group(fn, rt, experts, n_experts, rows, x, row_token, n_tokens, numerics, &g);
            st != COLI_OK) {
            return st;
        }
        if (g.device == COLI_DEVICE_CPU) {
            cpu_group(experts, n_experts, rows, x, row_token, row_weight, y, n_tokens, numerics);
            return COLI_OK;
        }
        std::string why;
        const coli_status st =
            gpu::expert_group(gpu_call(experts, n_experts, rows, row_token, row_weight, n_tokens, numerics, g), x, y, &why);
        return st == COLI_OK ? COLI_OK : gpu_failed(fn, g.device, st, why);
    });
}

COLI_API coli_status coli_expert_group_issue(const coli_expert *experts, int n_experts, const int64_t *rows,
                                             const float *x, const int64_t *row_token, const float *row_weight,
                                             int64_t n_tokens, int numerics, coli_group_ticket *ticket) {
    COLI_FORWARD(coli_expert_group_issue, experts, n_experts, rows, x, row_token, row_weight, n_tokens, numerics, ticket);
    const char *fn = __func__;
    return guarded(fn, [&]() -> coli_status {
        if (!ticket) return fail(COLI_ERR_INVALID_ARGUMENT, fn, "ticket must not be NULL");
        // Exclusive: the ticket set changes, and the tensors' pending counts with it.
        Runtime &rt = runtime();
        std::unique_lock<std::shared_mutex> lock(rt.mutex);
        Group g;
        if (const coli_status st = check_group(fn, rt, experts, n_experts, rows, x, row_token, n_tokens, numerics, &g);
            st != COLI_OK) {
            return st;
        }
        auto t = std::make_unique<coli_group_ticket_t>();
        t->device = g.device;
        for (int e = 0; e < n_experts; ++e) {
            t->tensors.insert(t->tensors.end(), {experts[e].gate, experts[e].up, experts[e].down});
        }
        if (g.device == COLI_DEVICE_CPU) {
            t->y.resize(static_cast<size_t>(n_tokens * g.D));
            cpu_group(experts, n_experts, rows, x, row_token, row_weight, t->y.data(), n_tokens, numerics);
        } else {
            std::string why;
            const coli_status st = gpu::expert_group_issue(
                gpu_call(experts, n_experts, rows, row_token, row_weight, n_tokens, numerics, g), x, &t->gpu_ticket, &why);
            if (st != COLI_OK) return gpu_failed(fn, g.device, st, why);
        }
        rt.tickets.insert(t.get());
        for (coli_tensor_t *tensor : t->tensors) ++tensor->pending_tickets;
        *ticket = t.release();
        return COLI_OK;
    });
}

COLI_API coli_status coli_expert_group_take(coli_group_ticket ticket, float *y) {
    COLI_FORWARD(coli_expert_group_take, ticket, y);
    const char *fn = __func__;
    return guarded(fn, [&]() -> coli_status {
        Runtime &rt = runtime();
        std::unique_lock<std::shared_mutex> lock(rt.mutex);
        if (!ticket || !rt.tickets.count(ticket)) {
            return fail(COLI_ERR_INVALID_ARGUMENT, fn, "ticket is not an issued group (NULL, already taken, or never issued)");
        }
        if (!y) return fail(COLI_ERR_INVALID_ARGUMENT, fn, "y must not be NULL");
        if (ticket->gpu_ticket) {
            std::string why;
            const coli_status st = gpu::expert_group_take(ticket->gpu_ticket, y, &why);
            if (st != COLI_OK) return gpu_failed(fn, ticket->device, st, why); // the ticket stays: take may be retried
            gpu::expert_group_discard(ticket->gpu_ticket);
        } else {
            std::copy(ticket->y.begin(), ticket->y.end(), y);
        }
        for (coli_tensor_t *tensor : ticket->tensors) --tensor->pending_tickets;
        rt.tickets.erase(ticket);
        delete ticket;
        return COLI_OK;
    });
}

} // extern "C"

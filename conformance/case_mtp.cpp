// Family "mtp": greedy speculative decoding on a small, fully specified synthetic MoE decoder,
// the numerics-parity probe of docs/conformance.md. Draft and verify run on the CPU or the GPU
// under test, in float and exact mode; every run is compared with the all-CPU run of the same
// mode. Exact mode on a GPU must give exactly the CPU's tokens and acceptance.
//
// The model (weights from the documented generator: src/testing/test_data.h, splitmix64 +
// Box-Muller, seeds below):
//   vocabulary 64, hidden 64, 2 MoE layers of 8 routed experts (Q8, intermediate 32), top-2;
//   x = E1[token] + E2[previous token]; per layer: router logits Wr x (host float), the two
//   largest (ties: lower index) weighted by a softmax over the pair, h = x + MoE(x);
//   next token = argmax(Wout h) (ties: lower index).
// The draft head is the cheaper model: the same output matrix on the hidden state after layer 0
// only. The verify step scores the K = 3 drafted positions in one batch (S = K + 1 rows).
#include <algorithm>
#include <cmath>
#include <memory>

#include "numerics/exact_math.h"
#include "runner.h"
#include "testing/test_data.h"

namespace coli::conformance {

namespace {

using namespace coli::testing;

constexpr int kVocab = 64, kHidden = 64, kLayers = 2, kExperts = 8, kTopK = 2, kInter = 32, kDraft = 3;
constexpr int kPrompts = 16, kTokensPerPrompt = 12, kTokens = kPrompts * kTokensPerPrompt;
constexpr uint64_t kSeed = 20261209;
constexpr float kLayer1Scale = 1.5f; // layer 1's down-projection scale: puts the CPU acceptance near 50%

struct Weights {
    std::vector<float> e1, e2, wout, router; // [V][D], [V][D], [V][D], [L][E][D]
    std::vector<Quantized> experts;          // [L][E][gate, up, down]
};

Weights make_weights() {
    Weights w;
    w.e1 = random_normal(kVocab * kHidden, kSeed + 1);
    w.e2 = random_normal(kVocab * kHidden, kSeed + 2, 0.5f);
    w.wout = random_normal(kVocab * kHidden, kSeed + 3);
    w.router = random_normal(kLayers * kExperts * kHidden, kSeed + 4);
    for (int l = 0; l < kLayers; ++l) {
        for (int e = 0; e < kExperts; ++e) {
            const uint64_t s = kSeed + 100 + 10 * (l * kExperts + e);
            const float scale = l == 1 ? kLayer1Scale : 1.0f;
            auto scaled = [&](int64_t O, int64_t I, uint64_t seed, float sigma) {
                return quantized(COLI_FORMAT_Q8, O, I, 0, random_normal(static_cast<size_t>(O * I), seed, sigma));
            };
            w.experts.push_back(scaled(kInter, kHidden, s, 0.1f));
            w.experts.push_back(scaled(kInter, kHidden, s + 1, 0.1f));
            w.experts.push_back(scaled(kHidden, kInter, s + 2, 0.1f * scale));
        }
    }
    return w;
}

// The experts of every layer uploaded to one device.
struct DeviceModel {
    std::vector<coli_expert> experts; // [L][E]
    bool ok = true;
    DeviceModel(const Weights &w, int device) {
        for (size_t k = 0; k < w.experts.size(); k += 3) {
            coli_expert ex{nullptr, nullptr, nullptr};
            coli_tensor *slots[3] = {&ex.gate, &ex.up, &ex.down};
            for (int j = 0; j < 3; ++j) {
                const Quantized &q = w.experts[k + j];
                ok = ok && coli_tensor_upload(slots[j], q.L.fmt, q.L.O, q.L.I, 0, q.weights.data(), q.scales.data(), device) == COLI_OK;
            }
            experts.push_back(ex);
        }
    }
    ~DeviceModel() {
        for (coli_expert &e : experts)
            for (coli_tensor t : {e.gate, e.up, e.down})
                if (t) coli_tensor_free(t);
    }
};

int argmax(const std::vector<float> &v) { return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin()); }

std::vector<float> logits_of(const Weights &w, const float *h) {
    std::vector<float> out(kVocab);
    for (int v = 0; v < kVocab; ++v) {
        float acc = 0.0f;
        for (int d = 0; d < kHidden; ++d) acc += w.wout[v * kHidden + d] * h[d];
        out[v] = acc;
    }
    return out;
}

// Predicted next tokens for S positions (prev[s], cur[s]); layers = 1 is the draft head.
bool predict(const Weights &w, DeviceModel &m, const std::vector<int> &prev, const std::vector<int> &cur, int layers,
             int numerics, std::vector<int> *next) {
    const int S = static_cast<int>(cur.size());
    std::vector<float> x(static_cast<size_t>(S) * kHidden);
    for (int s = 0; s < S; ++s)
        for (int d = 0; d < kHidden; ++d) x[s * kHidden + d] = w.e1[cur[s] * kHidden + d] + w.e2[prev[s] * kHidden + d];
    for (int l = 0; l < layers; ++l) {
        // Route: the two largest router logits per position, softmax over the pair.
        std::vector<std::vector<std::pair<int, float>>> per_expert(kExperts);
        for (int s = 0; s < S; ++s) {
            std::vector<float> lg(kExperts);
            for (int e = 0; e < kExperts; ++e) {
                float acc = 0.0f;
                for (int d = 0; d < kHidden; ++d) acc += w.router[(l * kExperts + e) * kHidden + d] * x[s * kHidden + d];
                lg[e] = acc;
            }
            const int a = argmax(lg);
            lg[a] = -INFINITY;
            const int b = argmax(lg);
            per_expert[a].push_back({s, 0.0f});
            per_expert[b].push_back({s, 0.0f});
        }
        // Softmax weights over each position's pair, recomputed in a fixed order.
        std::vector<int> ea(S, -1), eb(S, -1); // each position's two experts, lower index first
        for (int e = 0; e < kExperts; ++e)
            for (auto &p : per_expert[e]) (ea[p.first] < 0 ? ea[p.first] : eb[p.first]) = e;
        std::vector<int64_t> rows, token;
        std::vector<float> weight;
        std::vector<int> used;
        for (int e = 0; e < kExperts; ++e) {
            if (per_expert[e].empty()) continue;
            used.push_back(e);
            rows.push_back(static_cast<int64_t>(per_expert[e].size()));
            for (auto &p : per_expert[e]) {
                const int s = p.first;
                float la = 0.0f, lb = 0.0f;
                for (int d = 0; d < kHidden; ++d) {
                    la += w.router[(l * kExperts + ea[s]) * kHidden + d] * x[s * kHidden + d];
                    lb += w.router[(l * kExperts + eb[s]) * kHidden + d] * x[s * kHidden + d];
                }
                const float pa = 1.0f / (1.0f + coli_expf(lb - la)); // softmax of the pair
                token.push_back(s);
                weight.push_back(e == ea[s] ? pa : 1.0f - pa);
            }
        }
        std::vector<coli_expert> ex;
        for (int e : used) ex.push_back(m.experts[l * kExperts + e]);
        std::vector<float> xin;
        for (int e : used)
            for (auto &p : per_expert[e]) xin.insert(xin.end(), x.begin() + p.first * kHidden, x.begin() + (p.first + 1) * kHidden);
        std::vector<float> moe(static_cast<size_t>(S) * kHidden);
        if (coli_expert_group(ex.data(), static_cast<int>(ex.size()), rows.data(), xin.data(), token.data(), weight.data(),
                              moe.data(), S, numerics) != COLI_OK) {
            return false;
        }
        for (size_t k = 0; k < x.size(); ++k) x[k] += moe[k];
    }
    next->resize(S);
    for (int s = 0; s < S; ++s) (*next)[s] = argmax(logits_of(w, &x[s * kHidden]));
    return true;
}

struct Run {
    std::vector<int> tokens;
    int proposed = 0, accepted = 0;
    bool ok = true;
    double acceptance() const { return proposed ? static_cast<double>(accepted) / proposed : 0.0; }
};

// Greedy speculative decoding: draft K tokens with the draft head, verify them in one batch.
// kPrompts prompts (two tokens each, from the generator) continue for kTokensPerPrompt tokens;
// the tokens of all prompts are concatenated.
Run speculate(const Weights &w, DeviceModel &draft, DeviceModel &verify, int numerics) {
    Run r;
    for (int p = 0; p < kPrompts && r.ok; ++p) {
        std::vector<int> seq = {(p * 37 + 5) % kVocab, (p * 11 + 3) % kVocab};
        const size_t want = seq.size() + kTokensPerPrompt;
        while (seq.size() < want && r.ok) {
            std::vector<int> drafted;
            int prev = seq[seq.size() - 2], cur = seq.back();
            for (int k = 0; k < kDraft; ++k) {
                std::vector<int> next;
                r.ok = predict(w, draft, {prev}, {cur}, 1, numerics, &next);
                if (!r.ok) return r;
                drafted.push_back(next[0]);
                prev = cur;
                cur = next[0];
            }
            std::vector<int> vprev = {seq[seq.size() - 2]}, vcur = {seq.back()};
            for (int k = 0; k < kDraft; ++k) {
                vprev.push_back(vcur.back());
                vcur.push_back(drafted[k]);
            }
            std::vector<int> full;
            r.ok = predict(w, verify, vprev, vcur, kLayers, numerics, &full);
            if (!r.ok) return r;
            r.proposed += kDraft;
            int k = 0;
            while (k < kDraft && drafted[k] == full[k]) {
                seq.push_back(drafted[k]);
                ++k;
            }
            r.accepted += k;
            seq.push_back(full[k]); // the verify model's own token after the accepted prefix
        }
        seq.resize(want);
        r.tokens.insert(r.tokens.end(), seq.begin() + 2, seq.end());
    }
    return r;
}

} // namespace

void run_mtp(const Context &ctx, Recorder &r) {
    const Weights w = make_weights();
    DeviceModel cpu(w, COLI_DEVICE_CPU);
    std::unique_ptr<DeviceModel> dev;
    if (ctx.is_gpu()) dev = std::make_unique<DeviceModel>(w, ctx.device);
    for (int numerics : {COLI_NUMERICS_FLOAT, COLI_NUMERICS_EXACT}) {
        const char *mode = numerics == COLI_NUMERICS_EXACT ? "exact" : "float";
        Timer tm;
        const Run ref = speculate(w, cpu, cpu, numerics);
        const bool tuned = ref.acceptance() > 0.15 && ref.acceptance() < 0.85;
        r.record(ctx, "mtp", std::string("draft cpu, verify cpu, ") + mode,
                 {{"numerics", mode}, {"draft", "cpu"}, {"verify", "cpu"}, {"draft_length", kDraft}, {"prompts", kPrompts},
             {"tokens", kTokens}},
                 {{"acceptance", ref.acceptance()}, {"proposed", ref.proposed}, {"accepted", ref.accepted},
                  {"token_agreement_with_cpu", 1.0}},
                 ref.ok && tuned ? "ok" : "fail", tm.ms(), ref.ok ? (tuned ? "" : "the draft is badly tuned") : coli_last_error());
        for (int placement = 1; placement < 4; ++placement) {
            const bool draft_gpu = placement & 1, verify_gpu = placement & 2;
            const std::string name = std::string("draft ") + (draft_gpu ? "gpu" : "cpu") + ", verify " +
                                     (verify_gpu ? "gpu" : "cpu") + ", " + mode;
            if (!ctx.is_gpu()) {
                r.skip(ctx, "mtp", name, "needs a GPU");
                continue;
            }
            if (!dev->ok) {
                r.record(ctx, "mtp", name, json::object(), json::object(), "fail", 0, coli_last_error());
                continue;
            }
            Timer t2;
            const Run run = speculate(w, draft_gpu ? *dev : cpu, verify_gpu ? *dev : cpu, numerics);
            int agree = 0;
            for (int k = 0; k < kTokens; ++k) agree += run.ok && run.tokens[k] == ref.tokens[k];
            const double agreement = static_cast<double>(agree) / kTokens;
            const bool identical = agree == kTokens && run.accepted == ref.accepted;
            // Exact mode must reproduce the CPU run exactly; float mode records how close it is.
            const bool ok = run.ok && (numerics == COLI_NUMERICS_FLOAT || identical);
            r.record(ctx, "mtp", name,
                     {{"numerics", mode}, {"draft", draft_gpu ? "gpu" : "cpu"}, {"verify", verify_gpu ? "gpu" : "cpu"},
                      {"draft_length", kDraft}, {"prompts", kPrompts}, {"tokens", kTokens}},
                     {{"acceptance", run.acceptance()}, {"cpu_acceptance", ref.acceptance()}, {"proposed", run.proposed},
                      {"accepted", run.accepted}, {"token_agreement_with_cpu", agreement}, {"identical_to_cpu", identical}},
                     ok ? "ok" : "fail", t2.ms(), run.ok ? "" : coli_last_error());
        }
    }
}

} // namespace coli::conformance

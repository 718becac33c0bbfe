#include "store/expert_store.h"

#include <cerrno>
#include <cmath>
#include <map>
#include <cstdlib>
#include <cstring>

#include "formats/quantize.h"

namespace coli::store {

namespace {

const char *matrix_word(Matrix m) { return m == Matrix::gate ? "gate" : m == Matrix::up ? "up" : "down"; }

bool fail(std::string *why, const std::string &msg) {
    *why = msg;
    return false;
}

bool meta_int(const std::map<std::string, std::string> &meta, const std::string &file, const char *key, int64_t lo,
              int64_t hi, int64_t *value, std::string *why) {
    auto it = meta.find(key);
    if (it == meta.end()) return fail(why, file + ": metadata key '" + key + "' is missing");
    char *end = nullptr;
    errno = 0;
    const long long v = std::strtoll(it->second.c_str(), &end, 10);
    if (it->second.empty() || *end || errno || v < lo || v > hi) {
        return fail(why, file + ": metadata '" + key + "' = '" + it->second + "' is not an integer in [" +
                             std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    *value = v;
    return true;
}

const char *weight_dtype(int fmt) { return fmt == COLI_FORMAT_F32 ? "F32" : fmt == COLI_FORMAT_Q8 ? "I8" : "U8"; }

} // namespace

std::string matrix_name(int layer, int expert, Matrix m) {
    return "layers." + std::to_string(layer) + (expert < 0 ? ".shared." : ".experts." + std::to_string(expert) + ".") +
           matrix_word(m);
}

Layout matrix_layout(const StoreConfig &c, Matrix m) {
    Layout L;
    std::string why;
    const bool down = m == Matrix::down;
    make_layout(c.format, down ? c.hidden : c.intermediate, down ? c.intermediate : c.hidden,
                c.format == COLI_FORMAT_G4 ? c.group_size : 0, &L, &why);
    return L;
}

bool ExpertStore::open(const std::string &path, std::string *why) {
    if (!file_.open(path, why)) return false;
    const auto &meta = file_.metadata();
    int64_t layers = 0, experts = 0, hidden = 0, inter = 0, fmt = 0, gs = 0, shared = 0;
    if (!meta_int(meta, path, "coli.layers", 1, 1 << 20, &layers, why) ||
        !meta_int(meta, path, "coli.experts", 1, 1 << 20, &experts, why) ||
        !meta_int(meta, path, "coli.hidden", 1, kMaxDim, &hidden, why) ||
        !meta_int(meta, path, "coli.intermediate", 1, kMaxDim, &inter, why) ||
        !meta_int(meta, path, "coli.format", 0, 4, &fmt, why) || !meta_int(meta, path, "coli.group_size", 0, kMaxDim, &gs, why) ||
        !meta_int(meta, path, "coli.shared_expert", 0, 1, &shared, why)) {
        return false;
    }
    config_ = {static_cast<int>(layers), static_cast<int>(experts), hidden, inter, static_cast<int>(fmt), gs, shared == 1};
    Layout probe;
    std::string lay_why;
    if (!make_layout(config_.format, config_.intermediate, config_.hidden, fmt == COLI_FORMAT_G4 ? gs : 0, &probe, &lay_why) ||
        !make_layout(config_.format, config_.hidden, config_.intermediate, fmt == COLI_FORMAT_G4 ? gs : 0, &probe, &lay_why)) {
        return fail(why, path + ": metadata describes no valid matrix: " + lay_why);
    }
    for (int l = 0; l < config_.layers; ++l) {
        for (int e = config_.shared_expert ? -1 : 0; e < config_.experts; ++e) {
            for (Matrix m : {Matrix::gate, Matrix::up, Matrix::down}) {
                const Layout L = matrix_layout(config_, m);
                const std::string name = matrix_name(l, e, m);
                const TensorEntry *w = file_.find(name + ".weight");
                if (!w) return fail(why, path + ": missing tensor '" + name + ".weight'");
                if (w->dtype != weight_dtype(config_.format) || w->bytes() != L.weight_bytes) {
                    return fail(why, path + ": tensor '" + name + ".weight' is " + w->dtype + " of " + std::to_string(w->bytes()) +
                                         " bytes; the format needs " + weight_dtype(config_.format) + " of " +
                                         std::to_string(L.weight_bytes));
                }
                if (L.has_scales()) {
                    const TensorEntry *s = file_.find(name + ".scales");
                    if (!s) return fail(why, path + ": missing tensor '" + name + ".scales'");
                    if (s->dtype != "F32" || s->bytes() != L.scale_bytes()) {
                        return fail(why, path + ": tensor '" + name + ".scales' is " + s->dtype + " of " +
                                             std::to_string(s->bytes()) + " bytes; want F32 of " + std::to_string(L.scale_bytes()));
                    }
                }
            }
        }
    }
    return true;
}

bool ExpertStore::load(int layer, int expert, Matrix m, HostMatrix *out, std::string *why) const {
    out->L = matrix_layout(config_, m);
    const std::string name = matrix_name(layer, expert, m);
    out->weights.resize(out->L.weight_bytes);
    out->scales.resize(out->L.scale_count);
    if (!file_.read(name + ".weight", out->weights.data(), out->L.weight_bytes, why)) return false;
    return !out->L.has_scales() || file_.read(name + ".scales", out->scales.data(), out->L.scale_bytes(), why);
}

bool write_random_store(const std::string &path, const StoreConfig &c, uint64_t seed, std::string *why) {
    std::vector<TensorToWrite> tensors;
    uint64_t state = seed;
    auto uniform = [&] { // splitmix64 -> [-1, 1)
        uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return static_cast<float>(static_cast<double>((z ^ (z >> 31)) >> 11) * (2.0 / 9007199254740992.0) - 1.0);
    };
    for (int l = 0; l < c.layers; ++l) {
        for (int e = c.shared_expert ? -1 : 0; e < c.experts; ++e) {
            for (Matrix m : {Matrix::gate, Matrix::up, Matrix::down}) {
                const Layout L = matrix_layout(c, m);
                std::vector<float> w(static_cast<size_t>(L.O * L.I));
                for (float &v : w) v = 0.05f * uniform();
                TensorToWrite tw{matrix_name(l, e, m) + ".weight", weight_dtype(c.format), {L.O, (int64_t)L.row_bytes}, {}};
                if (c.format == COLI_FORMAT_F32) tw.shape = {L.O, L.I};
                tw.data.resize(L.weight_bytes);
                std::vector<float> scales(L.scale_count);
                quantize(L, w.data(), tw.data.data(), scales.data());
                tensors.push_back(std::move(tw));
                if (L.has_scales()) {
                    TensorToWrite ts{matrix_name(l, e, m) + ".scales", "F32", {L.O, L.groups}, {}};
                    ts.data.resize(L.scale_bytes());
                    std::memcpy(ts.data.data(), scales.data(), L.scale_bytes());
                    tensors.push_back(std::move(ts));
                }
            }
        }
    }
    const std::map<std::string, std::string> meta = {
        {"coli.layers", std::to_string(c.layers)},       {"coli.experts", std::to_string(c.experts)},
        {"coli.hidden", std::to_string(c.hidden)},       {"coli.intermediate", std::to_string(c.intermediate)},
        {"coli.format", std::to_string(c.format)},       {"coli.group_size", std::to_string(c.group_size)},
        {"coli.shared_expert", c.shared_expert ? "1" : "0"}};
    return write_safetensors(path, tensors, meta, why);
}

} // namespace coli::store

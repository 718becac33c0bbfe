// The expert weight store: one safetensors file holding every routed expert matrix of a model
// (and its scales), plus the per-layer shared expert as dense tensors. docs/expert-tier.md gives
// the tensor names and metadata keys.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "formats/layout.h"
#include "store/safetensors.h"

namespace coli::store {

struct StoreConfig {
    int layers = 0, experts = 0; // routed experts per layer
    int64_t hidden = 0;          // D
    int64_t intermediate = 0;    // F (per expert)
    int format = COLI_FORMAT_Q4;
    int64_t group_size = 0;      // G4 only
    bool shared_expert = true;   // one dense shared expert per layer
};

enum class Matrix { gate, up, down };

// "layers.3.experts.17.gate" (routed) or "layers.3.shared.gate" (expert < 0: the shared expert).
std::string matrix_name(int layer, int expert, Matrix m);
Layout matrix_layout(const StoreConfig &c, Matrix m);

// A matrix read from the store (weights and scales in host memory).
struct HostMatrix {
    Layout L;
    std::vector<uint8_t> weights;
    std::vector<float> scales;
};

class ExpertStore {
public:
    // Opens the file and checks the metadata and every tensor the config implies (presence,
    // dtype, shape): a store that opens can be read without surprises.
    bool open(const std::string &path, std::string *why);
    const StoreConfig &config() const { return config_; }
    const std::string &path() const { return file_.path(); }
    bool load(int layer, int expert, Matrix m, HostMatrix *out, std::string *why) const;

private:
    SafetensorsFile file_;
    StoreConfig config_;
};

// Writes a store of random weights (deterministic for a seed): for tests, the self-check and the
// demo. The shared expert is included when config.shared_expert.
bool write_random_store(const std::string &path, const StoreConfig &config, uint64_t seed, std::string *why);

} // namespace coli::store

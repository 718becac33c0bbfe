// The safetensors weight store: round trip, and every malformed file is a clean error that names
// the file and the tensor (truncation, lying offsets or sizes, unknown dtype, missing tensor).
#include <cstdio>
#include <fstream>
#include <string>
#include <unistd.h>

#include "catch_compat.h"
#include "store/expert_store.h"
#include "store/safetensors.h"

using namespace coli;
using namespace coli::store;

namespace {

std::string temp_path(const char *tag) {
    return "/tmp/coli_test_" + std::to_string(::getpid()) + "_" + tag + ".safetensors";
}

// A file made of an explicit header text and data bytes.
std::string write_raw(const char *tag, const std::string &header, const std::string &data, int64_t length_override = -1) {
    const std::string path = temp_path(tag);
    std::ofstream f(path, std::ios::binary);
    uint64_t len = length_override >= 0 ? static_cast<uint64_t>(length_override) : header.size();
    for (int k = 0; k < 8; ++k) f.put(static_cast<char>(len >> (8 * k)));
    f << header << data;
    return path;
}

void expect_open_error(const std::string &path, const std::string &text) {
    SafetensorsFile f;
    std::string why;
    CHECK_FALSE(f.open(path, &why));
    INFO(why);
    CHECK(why.find(path) != std::string::npos);
    CHECK(why.find(text) != std::string::npos);
    std::remove(path.c_str());
}

} // namespace

TEST_CASE("safetensors files round-trip tensors and metadata", "[store]") {
    const std::string path = temp_path("roundtrip");
    std::vector<TensorToWrite> ts = {{"a", "F32", {2, 2}, std::vector<uint8_t>(16, 7)}, {"b", "U8", {3}, {1, 2, 3}}};
    std::string why;
    REQUIRE(write_safetensors(path, ts, {{"k", "v"}}, &why));
    SafetensorsFile f;
    REQUIRE(f.open(path, &why));
    CHECK(f.metadata().at("k") == "v");
    REQUIRE(f.find("b"));
    CHECK(f.find("b")->shape == std::vector<int64_t>{3});
    std::vector<uint8_t> b(3);
    REQUIRE(f.read("b", b.data(), 3, &why));
    CHECK(b == std::vector<uint8_t>{1, 2, 3});
    CHECK_FALSE(f.read("nope", b.data(), 3, &why));
    CHECK(why.find("missing tensor 'nope'") != std::string::npos);
    std::remove(path.c_str());
}

TEST_CASE("malformed safetensors files are errors naming the file and the tensor", "[store]") {
    const std::string ok = R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
    expect_open_error(write_raw("empty", "", ""), "malformed JSON header");
    expect_open_error(write_raw("trunc_len", "", "", 5), "header length");
    expect_open_error(write_raw("json", "{not json", "", -1), "malformed JSON header");
    expect_open_error(write_raw("beyond", R"({"t":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", std::string(8, 'x')),
                      "tensor 't': data_offsets [0, 16) lie outside the 8-byte data section");
    expect_open_error(write_raw("size", R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, 'x')),
                      "tensor 't': data_offsets span 8 bytes but F32 of that shape needs 12");
    expect_open_error(write_raw("dtype", R"({"t":{"dtype":"Q7","shape":[2],"data_offsets":[0,8]}})", std::string(8, 'x')),
                      "tensor 't': unknown dtype 'Q7'");
    expect_open_error(write_raw("shape", R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", std::string(8, 'x')),
                      "tensor 't': shape");
    expect_open_error(write_raw("overflow", R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})",
                                std::string(8, 'x')),
                      "tensor 't'");
    expect_open_error(write_raw("reversed", R"({"t":{"dtype":"U8","shape":[0],"data_offsets":[8,0]}})", std::string(8, 'x')),
                      "tensor 't': data_offsets");
    expect_open_error(write_raw("fields", R"({"t":{"dtype":"U8"}})", ""), "tensor 't': needs dtype, shape and data_offsets");
    expect_open_error(write_raw("truncated_data", ok, std::string(4, 'x')), "lie outside");
    SafetensorsFile f;
    std::string why;
    CHECK_FALSE(f.open("/nonexistent/x.safetensors", &why));
    CHECK(why.find("cannot open") != std::string::npos);
}

TEST_CASE("expert stores: written, opened, validated, read back", "[store]") {
    const std::string path = temp_path("experts");
    StoreConfig c{2, 3, 64, 32, COLI_FORMAT_G4, 32, true};
    std::string why;
    REQUIRE(write_random_store(path, c, 7, &why));
    ExpertStore s;
    REQUIRE(s.open(path, &why));
    CHECK(s.config().layers == 2);
    CHECK(s.config().experts == 3);
    HostMatrix m;
    REQUIRE(s.load(1, 2, Matrix::down, &m, &why));
    CHECK((m.L.O == 64 && m.L.I == 32 && m.L.fmt == COLI_FORMAT_G4));
    CHECK(m.scales.size() == 64);
    REQUIRE(s.load(0, -1, Matrix::gate, &m, &why)); // the shared expert
    // The same seed gives the same bytes.
    const std::string again = temp_path("experts2");
    REQUIRE(write_random_store(again, c, 7, &why));
    std::ifstream a(path, std::ios::binary), b(again, std::ios::binary);
    CHECK(std::string(std::istreambuf_iterator<char>(a), {}) == std::string(std::istreambuf_iterator<char>(b), {}));
    std::remove(again.c_str());
    // A store missing one tensor does not open, and says which.
    SafetensorsFile raw;
    REQUIRE(raw.open(path, &why));
    std::vector<TensorToWrite> kept;
    for (const auto &[name, e] : raw.tensors()) {
        if (name == "layers.1.experts.2.up.scales") continue;
        TensorToWrite t{name, e.dtype, e.shape, std::vector<uint8_t>(e.bytes())};
        REQUIRE(raw.read(name, t.data.data(), e.bytes(), &why));
        kept.push_back(std::move(t));
    }
    const std::string broken = temp_path("broken");
    REQUIRE(write_safetensors(broken, kept, raw.metadata(), &why));
    ExpertStore bs;
    CHECK_FALSE(bs.open(broken, &why));
    CHECK(why.find("missing tensor 'layers.1.experts.2.up.scales'") != std::string::npos);
    CHECK(why.find(broken) != std::string::npos);
    std::remove(broken.c_str());
    std::remove(path.c_str());
}

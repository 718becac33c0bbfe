// The weight store: safetensors files (an 8-byte little-endian header length, a JSON header, then
// the tensor bytes). The reader validates the whole header before anything is read and never
// reads outside the file; every failure names the file and, where there is one, the tensor.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace coli::store {

struct TensorEntry {
    std::string dtype;          // "F32", "U8", "I8", ...
    std::vector<int64_t> shape;
    uint64_t begin = 0, end = 0; // byte offsets into the data section
    uint64_t bytes() const { return end - begin; }
};

class SafetensorsFile {
public:
    SafetensorsFile() = default;
    SafetensorsFile(const SafetensorsFile &) = delete;
    SafetensorsFile &operator=(const SafetensorsFile &) = delete;
    ~SafetensorsFile();

    // Opens and validates path; false with the reason in *why.
    bool open(const std::string &path, std::string *why);
    // Validates a header held in memory (the fuzz target's entry point): header_json is the JSON
    // text, data_size the length of the data section that follows it.
    bool parse_header(const std::string &header_json, uint64_t data_size, std::string *why);

    const std::string &path() const { return path_; }
    const std::map<std::string, TensorEntry> &tensors() const { return tensors_; }
    const std::map<std::string, std::string> &metadata() const { return metadata_; }
    const TensorEntry *find(const std::string &name) const;

    // Reads a whole tensor into out (out must hold entry.bytes()); false on a short read.
    bool read(const std::string &name, void *out, uint64_t bytes, std::string *why) const;

private:
    std::string path_;
    int fd_ = -1;
    uint64_t data_start_ = 0;
    std::map<std::string, TensorEntry> tensors_;
    std::map<std::string, std::string> metadata_;
};

// Size in bytes of one element of a safetensors dtype; 0 for an unknown dtype.
int dtype_size(const std::string &dtype);

struct TensorToWrite {
    std::string name, dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> data;
};

// Writes a safetensors file (header padded to 8 bytes, tensors in the given order).
bool write_safetensors(const std::string &path, const std::vector<TensorToWrite> &tensors,
                       const std::map<std::string, std::string> &metadata, std::string *why);

} // namespace coli::store

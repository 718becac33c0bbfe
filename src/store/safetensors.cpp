#include "store/safetensors.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

namespace coli::store {

namespace {

// A header larger than this is refused before it is read (real stores have a few MB).
constexpr uint64_t kMaxHeaderBytes = 256ull << 20;

bool fail(std::string *why, const std::string &file, const std::string &msg) {
    *why = file + ": " + msg;
    return false;
}

} // namespace

int dtype_size(const std::string &dtype) {
    if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
    if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
    if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
    if (dtype == "I8" || dtype == "U8" || dtype == "BOOL" || dtype == "F8_E4M3" || dtype == "F8_E5M2") return 1;
    return 0;
}

SafetensorsFile::~SafetensorsFile() {
    if (fd_ >= 0) ::close(fd_);
}

const TensorEntry *SafetensorsFile::find(const std::string &name) const {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second;
}

bool SafetensorsFile::parse_header(const std::string &header_json, uint64_t data_size, std::string *why) {
    const std::string &file = path_.empty() ? std::string("<header>") : path_;
    tensors_.clear();
    metadata_.clear();
    nlohmann::json header;
    try {
        header = nlohmann::json::parse(header_json);
    } catch (const nlohmann::json::exception &e) {
        return fail(why, file, std::string("malformed JSON header: ") + e.what());
    }
    if (!header.is_object()) return fail(why, file, "the header is not a JSON object");
    for (auto it = header.begin(); it != header.end(); ++it) {
        const std::string &name = it.key();
        const nlohmann::json &v = it.value();
        if (name == "__metadata__") {
            if (!v.is_object()) return fail(why, file, "__metadata__ is not an object");
            for (auto m = v.begin(); m != v.end(); ++m) {
                if (!m.value().is_string()) return fail(why, file, "__metadata__ value of '" + m.key() + "' is not a string");
                metadata_[m.key()] = m.value().get<std::string>();
            }
            continue;
        }
        const std::string where = "tensor '" + name + "': ";
        if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets")) {
            return fail(why, file, where + "needs dtype, shape and data_offsets");
        }
        if (!v["dtype"].is_string()) return fail(why, file, where + "dtype is not a string");
        TensorEntry e;
        e.dtype = v["dtype"].get<std::string>();
        const int esize = dtype_size(e.dtype);
        if (esize == 0) return fail(why, file, where + "unknown dtype '" + e.dtype + "'");
        const nlohmann::json &shape = v["shape"], &offsets = v["data_offsets"];
        if (!shape.is_array() || shape.size() > 8) return fail(why, file, where + "shape is not an array of at most 8 dimensions");
        uint64_t count = 1;
        for (const auto &d : shape) {
            if (!d.is_number_unsigned()) return fail(why, file, where + "shape holds a value that is not a non-negative integer");
            const uint64_t n = d.get<uint64_t>();
            if (n > (uint64_t)INT64_MAX || __builtin_mul_overflow(count, n, &count)) {
                return fail(why, file, where + "shape overflows");
            }
            e.shape.push_back(static_cast<int64_t>(n));
        }
        uint64_t bytes = 0;
        if (__builtin_mul_overflow(count, (uint64_t)esize, &bytes)) return fail(why, file, where + "size overflows");
        if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned()) {
            return fail(why, file, where + "data_offsets is not [begin, end]");
        }
        e.begin = offsets[0].get<uint64_t>();
        e.end = offsets[1].get<uint64_t>();
        if (e.begin > e.end || e.end > data_size) {
            return fail(why, file, where + "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                                       ") lie outside the " + std::to_string(data_size) + "-byte data section");
        }
        if (e.end - e.begin != bytes) {
            return fail(why, file, where + "data_offsets span " + std::to_string(e.end - e.begin) + " bytes but " + e.dtype +
                                       " of that shape needs " + std::to_string(bytes));
        }
        tensors_[name] = e;
    }
    return true;
}

bool SafetensorsFile::open(const std::string &path, std::string *why) {
    path_ = path;
    if (fd_ >= 0) ::close(fd_);
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) return fail(why, path, std::string("cannot open: ") + std::strerror(errno));
    struct stat st;
    if (::fstat(fd_, &st) != 0) return fail(why, path, std::string("cannot stat: ") + std::strerror(errno));
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    unsigned char len_bytes[8];
    if (size < 8 || ::pread(fd_, len_bytes, 8, 0) != 8) return fail(why, path, "truncated: no 8-byte header length");
    uint64_t header_len = 0;
    for (int k = 7; k >= 0; --k) header_len = (header_len << 8) | len_bytes[k];
    if (header_len > kMaxHeaderBytes || header_len > size - 8) {
        return fail(why, path, "header length " + std::to_string(header_len) + " exceeds the file (" + std::to_string(size) +
                                   " bytes) or the " + std::to_string(kMaxHeaderBytes) + "-byte limit");
    }
    std::string header(static_cast<size_t>(header_len), '\0');
    if (header_len && ::pread(fd_, &header[0], header_len, 8) != static_cast<ssize_t>(header_len)) {
        return fail(why, path, "truncated header");
    }
    data_start_ = 8 + header_len;
    return parse_header(header, size - data_start_, why);
}

bool SafetensorsFile::read(const std::string &name, void *out, uint64_t bytes, std::string *why) const {
    const TensorEntry *e = find(name);
    if (!e) return fail(why, path_, "missing tensor '" + name + "'");
    if (bytes != e->bytes()) {
        return fail(why, path_, "tensor '" + name + "' holds " + std::to_string(e->bytes()) + " bytes, expected " + std::to_string(bytes));
    }
    uint64_t done = 0;
    while (done < bytes) {
        const ssize_t n = ::pread(fd_, static_cast<char *>(out) + done, bytes - done, static_cast<off_t>(data_start_ + e->begin + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return fail(why, path_, "tensor '" + name + "': short read (file truncated or changed?)");
        done += static_cast<uint64_t>(n);
    }
    return true;
}

bool write_safetensors(const std::string &path, const std::vector<TensorToWrite> &tensors,
                       const std::map<std::string, std::string> &metadata, std::string *why) {
    nlohmann::ordered_json header;
    if (!metadata.empty()) header["__metadata__"] = metadata;
    uint64_t offset = 0;
    for (const TensorToWrite &t : tensors) {
        header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.data.size()}}};
        offset += t.data.size();
    }
    std::string text = header.dump();
    while ((8 + text.size()) % 8 != 0) text += ' ';
    FILE *f = std::fopen(path.c_str(), "wb");
    if (!f) return fail(why, path, std::string("cannot create: ") + std::strerror(errno));
    unsigned char len_bytes[8];
    uint64_t len = text.size();
    for (int k = 0; k < 8; ++k) len_bytes[k] = static_cast<unsigned char>(len >> (8 * k));
    bool ok = std::fwrite(len_bytes, 1, 8, f) == 8 && std::fwrite(text.data(), 1, text.size(), f) == text.size();
    for (const TensorToWrite &t : tensors) ok = ok && std::fwrite(t.data.data(), 1, t.data.size(), f) == t.data.size();
    ok = std::fclose(f) == 0 && ok;
    return ok ? true : fail(why, path, "write failed");
}

} // namespace coli::store

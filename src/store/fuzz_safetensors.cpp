// libFuzzer target for the safetensors header parser (tools/fuzz-store.sh builds and runs it).
// Input: the bytes of a whole file (8-byte length, header, data); the parser must reject or
// accept it without crashing or reading out of bounds (AddressSanitizer watches).
#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>

#include "store/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const std::string path = "/tmp/coli_fuzz_" + std::to_string(::getpid()) + ".safetensors";
    FILE *f = std::fopen(path.c_str(), "wb");
    if (!f) return 0;
    std::fwrite(data, 1, size, f);
    std::fclose(f);
    coli::store::SafetensorsFile file;
    std::string why;
    if (file.open(path, &why)) {
        for (const auto &entry : file.tensors()) { // a header that validates must be readable as declared
            std::string buf(entry.second.bytes(), '\0');
            file.read(entry.first, &buf[0], entry.second.bytes(), &why);
        }
    }
    return 0;
}

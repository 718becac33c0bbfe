// Contract tests of the fail-closed module loader, one case per process (a loaded module stays
// mapped): coli-loader-contract CASE GOOD OTHER MISSING BADABI HIPRUNTIME SCRATCH, or
// coli-loader-contract real-module BACKEND DIR RUNTIME_DIR for the module this build made.
// Exit 0 when the loader behaves as the case requires, 1 otherwise.
#include <cstdio>
#include <fstream>
#include <string>

#include <sys/stat.h>
#ifdef _WIN32
#include <direct.h>
#endif

#include "loader/module_loader.h"

using namespace coli::loader;

namespace {

void make_dir(const std::string &path) {
#ifdef _WIN32
    _mkdir(path.c_str());
#else
    ::mkdir(path.c_str(), 0755);
#endif
}

bool ends_with(const std::string &s, const std::string &tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

bool expect_refused(const ModuleConfig &c, const std::string &text) {
    LoadedModule m;
    std::string why;
    const coli_status st = load_backend_module(c, &m, &why);
    std::printf("%s -> %s\n", c.dir.c_str(), why.c_str());
    return st != COLI_OK && why.find(text) != std::string::npos;
}

bool expect_loaded(const ModuleConfig &c) {
    LoadedModule m;
    std::string why;
    const coli_status st = load_backend_module(c, &m, &why);
    std::printf("%s -> %s (%zu symbols, runtime %s)\n", c.dir.c_str(), st == COLI_OK ? "loaded" : why.c_str(),
                m.symbols.size(), m.runtime_path.empty() ? "-" : m.runtime_path.c_str());
    return st == COLI_OK && m.symbols.size() == 30 && m.path.compare(0, c.dir.size(), c.dir) == 0 &&
           ends_with(m.path, module_file_name(c.backend));
}

} // namespace

int main(int argc, char **argv) {
    if (argc == 5 && std::string(argv[1]) == "real-module") { // real-module BACKEND DIR RUNTIME_DIR
        const bool ok = expect_loaded({argv[2], argv[3], argv[4]});
        std::printf("real-module: %s\n", ok ? "as required" : "NOT as required");
        return ok ? 0 : 1;
    }
    if (argc != 8) {
        std::fprintf(stderr, "usage: %s CASE GOOD OTHER MISSING BADABI HIPRUNTIME SCRATCH\n", argv[0]);
        return 2;
    }
    const std::string which = argv[1], good = argv[2], other = argv[3], missing = argv[4], badabi = argv[5],
                      hiprt = argv[6], scratch = argv[7];
    bool ok = false;
    if (which == "right-module") {
        ok = expect_loaded({"cuda", good, ""});
    } else if (which == "wrong-path") {
        ok = expect_refused({"cuda", good + "/nowhere", ""}, "does not exist");
    } else if (which == "relative-dir") {
        ok = expect_refused({"cuda", "fixtures/good", ""}, "must be an absolute directory");
    } else if (which == "duplicate-basename") {
        ok = expect_loaded({"cuda", good, ""}) && expect_refused({"cuda", other, ""}, "is already loaded from");
    } else if (which == "missing-symbol") {
        ok = expect_refused({"cuda", missing, ""}, "missing symbol coli_expert_mlp");
    } else if (which == "abi-mismatch") {
        ok = expect_refused({"cuda", badabi, ""}, "ABI version 2, this host needs 1");
    } else if (which == "unreadable-file") {
        const std::string dir1 = scratch + "/not-elf", dir2 = scratch + "/not-regular";
        make_dir(scratch);
        make_dir(dir1);
        make_dir(dir2);
        std::ofstream(dir1 + "/" + module_file_name("cuda")) << "this is not a shared object\n";
        make_dir(dir2 + "/" + module_file_name("cuda"));
        ok = expect_refused({"cuda", dir1, ""}, "is not a loadable module") &&
             expect_refused({"cuda", dir2, ""}, "is not a regular file");
    } else if (which == "hip-runtime") {
        const std::string empty = scratch + "/no-runtime";
        make_dir(scratch);
        make_dir(empty);
        ok = expect_refused({"hip", good, empty}, "exactly one is required") &&
             expect_refused({"hip", good, "relative/dir"}, "COLI_HIP_RUNTIME_DIR must be an absolute directory") &&
             expect_loaded({"hip", good, hiprt});
    } else if (which == "bad-backend") {
        LoadedModule m;
        std::string why;
        ok = load_backend_module({"metal", good, ""}, &m, &why) == COLI_ERR_INVALID_ARGUMENT &&
             why.find("not cuda or hip") != std::string::npos;
    } else {
        std::fprintf(stderr, "unknown case %s\n", which.c_str());
        return 2;
    }
    std::printf("%s: %s\n", which.c_str(), ok ? "as required" : "NOT as required");
    return ok ? 0 : 1;
}

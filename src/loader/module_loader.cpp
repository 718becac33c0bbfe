#include "loader/module_loader.h"

#include <cstring>
#include <vector>

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loader/abi_symbols.h"

namespace coli::loader {

namespace {

coli_status refuse(std::string *why, const std::string &msg) {
    *why = msg;
    return COLI_ERR_NO_DEVICE;
}

std::string basename_of(const std::string &p) {
    const size_t slash = p.rfind('/');
    return slash == std::string::npos ? p : p.substr(slash + 1);
}

bool same_file(const std::string &a, const std::string &b) {
    struct stat sa, sb;
    return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

// A regular, readable ELF file; empty string when it is, else the reason.
std::string check_file(const std::string &path) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return path + " does not exist";
    if (!S_ISREG(st.st_mode)) return path + " is not a regular file";
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return path + " is not readable: " + std::strerror(errno);
    char magic[4] = {0, 0, 0, 0};
    const ssize_t n = ::read(fd, magic, 4);
    ::close(fd);
    if (n != 4 || std::memcmp(magic, "\x7f" "ELF", 4) != 0) return path + " is not an ELF shared object";
    return "";
}

// Objects already mapped in the process whose file name is `name`.
std::vector<std::string> mapped_named(const std::string &name) {
    std::vector<std::string> found;
    auto cb = [](struct dl_phdr_info *info, size_t, void *data) -> int {
        auto *ctx = static_cast<std::pair<const std::string *, std::vector<std::string> *> *>(data);
        const std::string path = info->dlpi_name ? info->dlpi_name : "";
        const size_t slash = path.rfind('/');
        const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
        if (!path.empty() && base.compare(0, ctx->first->size(), *ctx->first) == 0) ctx->second->push_back(path);
        return 0;
    };
    std::pair<const std::string *, std::vector<std::string> *> ctx(&name, &found);
    dl_iterate_phdr(cb, &ctx);
    return found;
}

// dlopen by absolute path, then make sure the object the loader mapped is that very file.
coli_status open_exact(const std::string &path, int flags, void **handle, std::string *why) {
    for (const std::string &other : mapped_named(basename_of(path))) {
        if (!same_file(other, path)) {
            return refuse(why, "refusing " + path + ": a module named " + basename_of(path) + " is already loaded from " +
                                   other);
        }
    }
    void *h = ::dlopen(path.c_str(), flags);
    if (!h) return refuse(why, "cannot load " + path + ": " + ::dlerror());
    struct link_map *lm = nullptr;
    if (::dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || !lm || !same_file(lm->l_name, path)) {
        ::dlclose(h);
        return refuse(why, "refusing " + path + ": the mapped object is not that file");
    }
    *handle = h;
    return COLI_OK;
}

// The HIP runtime: exactly one libamdhip64.so.N in runtime_dir.
coli_status find_hip_runtime(const std::string &dir, std::string *path, std::string *why) {
    DIR *d = ::opendir(dir.c_str());
    if (!d) return refuse(why, "COLI_HIP_RUNTIME_DIR=" + dir + " is not a readable directory");
    std::vector<std::string> hits;
    while (struct dirent *e = ::readdir(d)) {
        // libamdhip64.so.<major> only: the fully versioned file it links to is the same runtime.
        const std::string n = e->d_name, prefix = "libamdhip64.so.";
        const bool major_only = n.size() > prefix.size() && n.rfind(prefix, 0) == 0 &&
                                n.find_first_not_of("0123456789", prefix.size()) == std::string::npos;
        struct stat st;
        if (major_only && ::stat((dir + "/" + n).c_str(), &st) == 0 && S_ISREG(st.st_mode)) hits.push_back(dir + "/" + n);
    }
    ::closedir(d);
    if (hits.size() != 1) {
            return refuse(why, "COLI_HIP_RUNTIME_DIR=" + dir + " holds " + std::to_string(hits.size()) +
                               " libamdhip64.so.<major> files; exactly one is required");
    }
    *path = hits[0];
    return COLI_OK;
}

} // namespace

coli_status load_backend_module(const ModuleConfig &c, LoadedModule *out, std::string *why) {
    if (c.backend != "cuda" && c.backend != "hip") {
        *why = "COLI_GPU_BACKEND='" + c.backend + "' is not cuda or hip";
        return COLI_ERR_INVALID_ARGUMENT;
    }
    if (c.dir.empty() || c.dir[0] != '/') {
        return refuse(why, "COLI_BACKEND_DIR must be an absolute directory (got '" + c.dir +
                               "'); modules are never looked up on the system path");
    }
    const std::string path = c.dir + "/libcoli_" + c.backend + ".so";
    if (const std::string bad = check_file(path); !bad.empty()) return refuse(why, "COLI_BACKEND_DIR: " + bad);
    LoadedModule m;
    m.path = path;
    if (c.backend == "hip") {
        if (c.runtime_dir.empty() || c.runtime_dir[0] != '/') {
            return refuse(why, "COLI_HIP_RUNTIME_DIR must be an absolute directory holding libamdhip64.so.N (got '" +
                                   c.runtime_dir + "')");
        }
        if (const coli_status st = find_hip_runtime(c.runtime_dir, &m.runtime_path, why); st != COLI_OK) return st;
        if (const std::string bad = check_file(m.runtime_path); !bad.empty()) return refuse(why, bad);
        void *rt = nullptr;
        // Global, so that the module's own dependency on the runtime resolves to this copy.
        if (const coli_status st = open_exact(m.runtime_path, RTLD_NOW | RTLD_GLOBAL, &rt, why); st != COLI_OK) return st;
    }
    if (const coli_status st = open_exact(path, RTLD_NOW | RTLD_LOCAL, &m.handle, why); st != COLI_OK) return st;
    using AbiFn = int (*)();
    auto abi = reinterpret_cast<AbiFn>(::dlsym(m.handle, "coli_abi_version"));
    if (!abi || abi() != COLI_ABI_VERSION) {
        const std::string got = abi ? std::to_string(abi()) : "none";
        ::dlclose(m.handle);
        return refuse(why, "refusing " + path + ": ABI version " + got + ", this host needs " + std::to_string(COLI_ABI_VERSION));
    }
#define COLI_RESOLVE(name)                                                                                        \
    if (void *sym = ::dlsym(m.handle, #name)) {                                                                  \
        m.symbols[#name] = sym;                                                                                  \
    } else {                                                                                                     \
        ::dlclose(m.handle);                                                                                     \
        return refuse(why, "refusing " + path + ": missing symbol " #name);                                      \
    }
    COLI_ABI_SYMBOLS(COLI_RESOLVE)
#undef COLI_RESOLVE
    *out = m;
    return COLI_OK;
}

} // namespace coli::loader

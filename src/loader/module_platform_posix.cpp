// ELF modules through dlopen (Linux). module_platform.h.
#include "loader/module_platform.h"

#include <cerrno>
#include <cstring>
#include <vector>

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

namespace coli::loader::platform {

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

// Objects already mapped in the process whose file name is `name`.
std::vector<std::string> mapped_named(const std::string &name) {
    std::vector<std::string> found;
    auto cb = [](struct dl_phdr_info *info, size_t, void *data) -> int {
        auto *ctx = static_cast<std::pair<const std::string *, std::vector<std::string> *> *>(data);
        const std::string path = info->dlpi_name ? info->dlpi_name : "";
        if (!path.empty() && basename_of(path) == *ctx->first) ctx->second->push_back(path);
        return 0;
    };
    std::pair<const std::string *, std::vector<std::string> *> ctx(&name, &found);
    dl_iterate_phdr(cb, &ctx);
    return found;
}

} // namespace

bool is_absolute(const std::string &dir) { return !dir.empty() && dir[0] == '/'; }
std::string join(const std::string &dir, const std::string &name) { return dir + "/" + name; }
std::string module_file_name(const std::string &backend) { return "libcoli_" + backend + ".so"; }
const char *hip_runtime_pattern() { return "libamdhip64.so.<major>"; }

std::string check_file(const std::string &path) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return path + " does not exist";
    if (!S_ISREG(st.st_mode)) return path + " is not a regular file";
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return path + " is not readable: " + std::strerror(errno);
    char magic[4] = {0, 0, 0, 0};
    const ssize_t n = ::read(fd, magic, 4);
    ::close(fd);
    if (n != 4 || std::memcmp(magic, "\x7f" "ELF", 4) != 0) return path + " is not a loadable module (no ELF header)";
    return "";
}

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
        return refuse(why, "COLI_HIP_RUNTIME_DIR=" + dir + " holds " + std::to_string(hits.size()) + " " +
                               hip_runtime_pattern() + " files; exactly one is required");
    }
    *path = hits[0];
    return COLI_OK;
}

coli_status open_exact(const std::string &path, bool global, void **handle, std::string *why) {
    for (const std::string &other : mapped_named(basename_of(path))) {
        if (!same_file(other, path)) {
            return refuse(why, "refusing " + path + ": a module named " + basename_of(path) + " is already loaded from " +
                                   other);
        }
    }
    void *h = ::dlopen(path.c_str(), RTLD_NOW | (global ? RTLD_GLOBAL : RTLD_LOCAL));
    if (!h) return refuse(why, "cannot load " + path + ": " + ::dlerror());
    struct link_map *lm = nullptr;
    if (::dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || !lm || !same_file(lm->l_name, path)) {
        ::dlclose(h);
        return refuse(why, "refusing " + path + ": the mapped object is not that file");
    }
    *handle = h;
    return COLI_OK;
}

void *symbol(void *handle, const char *name) { return ::dlsym(handle, name); }
void close(void *handle) { ::dlclose(handle); }

} // namespace coli::loader::platform

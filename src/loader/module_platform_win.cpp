// PE modules through LoadLibraryEx (Windows). module_platform.h. Paths are UTF-8 here and wide
// for the system calls. A DLL's imports by name (the module's amdhip64_N.dll) resolve to a DLL of
// that name already loaded, which is why the runtime is loaded first, by full path.
#include "loader/module_platform.h"

#include <cctype>
#include <cstdio>
#include <vector>

#include <windows.h>

namespace coli::loader::platform {

namespace {

coli_status refuse(std::string *why, const std::string &msg) {
    *why = msg;
    return COLI_ERR_NO_DEVICE;
}

std::wstring wide(const std::string &s) {
    const int n = MultiByteToWideChar(CP_UTF8, 0, s.c_str(), -1, nullptr, 0);
    std::wstring w(n > 0 ? n - 1 : 0, L'\0');
    if (n > 1) MultiByteToWideChar(CP_UTF8, 0, s.c_str(), -1, &w[0], n);
    return w;
}

std::string narrow(const std::wstring &w) {
    const int n = WideCharToMultiByte(CP_UTF8, 0, w.c_str(), -1, nullptr, 0, nullptr, nullptr);
    std::string s(n > 0 ? n - 1 : 0, '\0');
    if (n > 1) WideCharToMultiByte(CP_UTF8, 0, w.c_str(), -1, &s[0], n, nullptr, nullptr);
    return s;
}

std::string basename_of(const std::string &p) {
    const size_t slash = p.find_last_of("/\\");
    return slash == std::string::npos ? p : p.substr(slash + 1);
}

std::string system_error_text() {
    const DWORD code = GetLastError();
    char buf[256] = {0};
    FormatMessageA(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, nullptr, code, 0, buf, sizeof buf, nullptr);
    std::string text = buf;
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
    return text.empty() ? "error " + std::to_string(code) : text;
}

// The file's identity: volume serial number and file index; false when it cannot be opened.
bool file_id(const std::wstring &path, unsigned long long id[2]) {
    HANDLE h = CreateFileW(path.c_str(), 0, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr, OPEN_EXISTING,
                           FILE_FLAG_BACKUP_SEMANTICS, nullptr);
    if (h == INVALID_HANDLE_VALUE) return false;
    BY_HANDLE_FILE_INFORMATION info;
    const bool ok = GetFileInformationByHandle(h, &info) != 0;
    CloseHandle(h);
    if (!ok) return false;
    id[0] = info.dwVolumeSerialNumber;
    id[1] = ((unsigned long long)info.nFileIndexHigh << 32) | info.nFileIndexLow;
    return true;
}

bool same_file(const std::wstring &a, const std::wstring &b) {
    unsigned long long ia[2], ib[2];
    return file_id(a, ia) && file_id(b, ib) && ia[0] == ib[0] && ia[1] == ib[1];
}

std::wstring module_path(HMODULE h) {
    std::vector<wchar_t> buf(32768);
    const DWORD n = GetModuleFileNameW(h, buf.data(), (DWORD)buf.size());
    return std::wstring(buf.data(), n);
}

} // namespace

bool is_absolute(const std::string &dir) {
    // C:\..., C:/... or a UNC path \\server\share; never a bare name the search path would resolve
    return (dir.size() >= 3 && std::isalpha((unsigned char)dir[0]) && dir[1] == ':' && (dir[2] == '\\' || dir[2] == '/')) ||
           (dir.size() >= 2 && dir[0] == '\\' && dir[1] == '\\');
}

std::string join(const std::string &dir, const std::string &name) { return dir + "\\" + name; }
std::string module_file_name(const std::string &backend) { return "coli_" + backend + ".dll"; }
const char *hip_runtime_pattern() { return "amdhip64_<major>.dll"; }

std::string check_file(const std::string &path) {
    const DWORD attributes = GetFileAttributesW(wide(path).c_str());
    if (attributes == INVALID_FILE_ATTRIBUTES) return path + " does not exist";
    if (attributes & (FILE_ATTRIBUTE_DIRECTORY | FILE_ATTRIBUTE_DEVICE)) return path + " is not a regular file";
    HANDLE h = CreateFileW(wide(path).c_str(), GENERIC_READ, FILE_SHARE_READ, nullptr, OPEN_EXISTING, 0, nullptr);
    if (h == INVALID_HANDLE_VALUE) return path + " is not readable: " + system_error_text();
    char magic[2] = {0, 0};
    DWORD n = 0;
    const BOOL ok = ReadFile(h, magic, 2, &n, nullptr);
    CloseHandle(h);
    if (!ok || n != 2 || magic[0] != 'M' || magic[1] != 'Z') return path + " is not a loadable module (no PE header)";
    return "";
}

coli_status find_hip_runtime(const std::string &dir, std::string *path, std::string *why) {
    WIN32_FIND_DATAW found;
    HANDLE h = FindFirstFileW(wide(join(dir, "amdhip64_*.dll")).c_str(), &found);
    std::vector<std::string> hits;
    if (h != INVALID_HANDLE_VALUE) {
        do {
            // amdhip64_<major>.dll only
            const std::string n = narrow(found.cFileName), prefix = "amdhip64_", suffix = ".dll";
            const bool major_only = n.size() > prefix.size() + suffix.size() &&
                                    n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0 &&
                                    n.substr(prefix.size(), n.size() - prefix.size() - suffix.size())
                                            .find_first_not_of("0123456789") == std::string::npos;
            if (major_only && !(found.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY)) hits.push_back(join(dir, n));
        } while (FindNextFileW(h, &found));
        FindClose(h);
    } else if (GetFileAttributesW(wide(dir).c_str()) == INVALID_FILE_ATTRIBUTES) {
        return refuse(why, "COLI_HIP_RUNTIME_DIR=" + dir + " is not a readable directory");
    }
    if (hits.size() != 1) {
        return refuse(why, "COLI_HIP_RUNTIME_DIR=" + dir + " holds " + std::to_string(hits.size()) + " " +
                               hip_runtime_pattern() + " files; exactly one is required");
    }
    *path = hits[0];
    return COLI_OK;
}

coli_status open_exact(const std::string &path, bool global, void **handle, std::string *why) {
    (void)global; // a loaded DLL serves imports of its name process-wide
    const std::wstring wpath = wide(path);
    if (HMODULE other = GetModuleHandleW(wide(basename_of(path)).c_str())) {
        const std::wstring other_path = module_path(other);
        if (!same_file(other_path, wpath)) {
            return refuse(why, "refusing " + path + ": a module named " + basename_of(path) + " is already loaded from " +
                                   narrow(other_path));
        }
    }
    // The full path, and its dependencies from its own directory before the system's.
    HMODULE h = LoadLibraryExW(wpath.c_str(), nullptr, LOAD_WITH_ALTERED_SEARCH_PATH);
    if (!h) return refuse(why, "cannot load " + path + ": " + system_error_text());
    if (!same_file(module_path(h), wpath)) {
        FreeLibrary(h);
        return refuse(why, "refusing " + path + ": the mapped object is not that file");
    }
    *handle = (void *)h;
    return COLI_OK;
}

void *symbol(void *handle, const char *name) { return (void *)GetProcAddress((HMODULE)handle, name); }
void close(void *handle) { FreeLibrary((HMODULE)handle); }

} // namespace coli::loader::platform

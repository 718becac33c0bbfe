#include "api/dispatch.h"
#include "api/errors.h"

namespace coli {

namespace {
thread_local std::string t_last_error;
} // namespace

coli_status fail(coli_status status, const char *function, const std::string &message) {
    try {
        t_last_error = std::string(function) + ": " + message;
    } catch (...) { // no memory even for the message: keep the status
    }
    return status;
}

} // namespace coli

extern "C" {

COLI_API const char *coli_last_error(void) {
    COLI_FORWARD0(coli_last_error);
    return coli::t_last_error.c_str();
}

COLI_API const char *coli_status_name(coli_status status) {
    COLI_FORWARD(coli_status_name, status);
    switch (status) {
    case COLI_OK: return "COLI_OK";
    case COLI_ERR_INVALID_ARGUMENT: return "COLI_ERR_INVALID_ARGUMENT";
    case COLI_ERR_UNSUPPORTED: return "COLI_ERR_UNSUPPORTED";
    case COLI_ERR_NO_DEVICE: return "COLI_ERR_NO_DEVICE";
    case COLI_ERR_OUT_OF_MEMORY: return "COLI_ERR_OUT_OF_MEMORY";
    case COLI_ERR_DEVICE: return "COLI_ERR_DEVICE";
    case COLI_ERR_IO: return "COLI_ERR_IO";
    case COLI_ERR_INTERNAL: return "COLI_ERR_INTERNAL";
    }
    return "COLI_ERR_UNKNOWN_STATUS";
}

} // extern "C"

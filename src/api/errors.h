// Error reporting at the C boundary: a thread-local message and the guard every entry point runs
// its body in, so that neither exceptions nor aborts cross the ABI.
#pragma once

#include <new>
#include <stdexcept>
#include <string>

#include "coli/coli.h"

namespace coli {

// Sets coli_last_error() to "<function>: <message>" and returns status.
coli_status fail(coli_status status, const char *function, const std::string &message);

// Runs body (returning coli_status); maps std::bad_alloc to OUT_OF_MEMORY, any other exception
// to INTERNAL.
template <class Body>
coli_status guarded(const char *function, Body &&body) noexcept {
    try {
        return body();
    } catch (const std::bad_alloc &) {
        return fail(COLI_ERR_OUT_OF_MEMORY, function, "out of host memory");
    } catch (const std::exception &e) {
        return fail(COLI_ERR_INTERNAL, function, std::string("internal error: ") + e.what());
    } catch (...) {
        return fail(COLI_ERR_INTERNAL, function, "internal error: unknown exception");
    }
}

} // namespace coli

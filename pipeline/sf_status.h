/* sf_status.h: the one status type every spanfence function that acts returns.
 * 0 is success, every error is negative. "Retry later" and "permanent" are
 * distinct codes so a receiver can tell a client which one it is. */
#ifndef SF_STATUS_H
#define SF_STATUS_H

#include <stdbool.h>

/* X(NAME, value, retryable, message) */
#define SF_STATUS_MAP(X)                                                    \
    X(OK,        0,  false, "ok")                                           \
    X(ENOMEM,   -1,  true,  "out of memory")                                \
    X(RETRY,    -2,  true,  "temporarily unavailable, retry later")         \
    X(FULL,     -3,  true,  "queue full")                                   \
    X(MEMLIMIT, -4,  true,  "memory limit reached")                         \
    X(PERMANENT,-5,  false, "permanent failure")                            \
    X(INVALID,  -6,  false, "invalid input")                                \
    X(TOOBIG,   -7,  false, "too large")                                    \
    X(FILTER,   -8,  false, "batch could not be filtered")                  \
    X(IO,       -9,  true,  "i/o error")                                    \
    X(CONFIG,  -10,  false, "invalid configuration")                        \
    X(STOPPED, -11,  true,  "shutting down")                                \
    X(UNSUPPORTED, -12, false, "not supported")

typedef enum sf_status {
#define SF_STATUS_ENUM(name, val, retry, msg) SF_##name = (val),
    SF_STATUS_MAP(SF_STATUS_ENUM)
#undef SF_STATUS_ENUM
} sf_status;

/* Short name of a status, e.g. "SF_FULL" -> "full". Never NULL. */
const char *sf_status_name(sf_status s);
/* Human-readable message, lowercase, no full stop. Never NULL. */
const char *sf_status_str(sf_status s);
/* Whether the same request may succeed if sent again later. */
bool sf_status_retryable(sf_status s);

#endif

/* tools/grpc_core.h: gRPC core references for the tools and benches that
 * speak gRPC core themselves (tools/sf_send.c, bench/bench_floor.c; the
 * collector does not: its `otlp` exporter is libcurl over HTTP/2), with
 * gRPC's log routed into sf_log, and the names of gRPC's status codes.
 * Header-only. gRPC counts grpc_init() calls and tears itself down on the
 * last grpc_shutdown(), so each user holds one reference while it runs. */
#ifndef SF_TOOLS_GRPC_CORE_H
#define SF_TOOLS_GRPC_CORE_H

#include <pthread.h>

#include <grpc/grpc.h>
#include <grpc/status.h>
#include <grpc/support/log.h>

#include "sf_log.h"

static inline void sf_grpc_log_to_sf_(gpr_log_func_args *args)
{
    sf_log_level lvl = args->severity == GPR_LOG_SEVERITY_ERROR ? SF_LOG_ERROR
                       : args->severity == GPR_LOG_SEVERITY_INFO ? SF_LOG_INFO : SF_LOG_DEBUG;
    sf_log(lvl, "grpc: %s", args->message);
}

static inline void sf_grpc_route_log_(void)
{
    gpr_set_log_function(sf_grpc_log_to_sf_);
}

/* grpc_init(), after routing gRPC's log into sf_log (once per process) at
 * the level set now (debug shows gRPC's debug lines, otherwise errors
 * only): it may have changed since the last reference. Pair each call
 * with sf_grpc_shutdown(). */
static inline void sf_grpc_init(void)
{
    static pthread_once_t log_once = PTHREAD_ONCE_INIT;

    pthread_once(&log_once, sf_grpc_route_log_);
    gpr_set_log_verbosity(sf_log_get_level() <= SF_LOG_DEBUG ? GPR_LOG_SEVERITY_DEBUG
                                                             : GPR_LOG_SEVERITY_ERROR);
    grpc_init();
}

static inline void sf_grpc_shutdown(void)
{
    grpc_shutdown();
}

/* The name of a gRPC status code ("UNAVAILABLE"), for messages; "status"
 * for a code gRPC does not define. */
static inline const char *sf_grpc_status_name(int code)
{
    static const char *const names[] = {
        "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
        "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
        "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
        "UNAUTHENTICATED",
    };

    if (code < 0 || code > GRPC_STATUS_UNAUTHENTICATED)
        return "status";
    return names[code];
}

#endif

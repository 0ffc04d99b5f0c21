/* grpc_core.c: gRPC core references (grpc_core.h), gRPC's log routed into
 * sf_log, and the names of gRPC's status codes. */
#include "grpc_core.h"
#include "sf_log.h"

#include <pthread.h>

#include <grpc/grpc.h>
#include <grpc/status.h>
#include <grpc/support/log.h>

static pthread_once_t log_once = PTHREAD_ONCE_INIT;

static void grpc_log_to_sf(gpr_log_func_args *args)
{
    sf_log_level lvl = args->severity == GPR_LOG_SEVERITY_ERROR ? SF_LOG_ERROR
                       : args->severity == GPR_LOG_SEVERITY_INFO ? SF_LOG_INFO : SF_LOG_DEBUG;
    sf_log(lvl, "grpc: %s", args->message);
}

static void route_log(void)
{
    gpr_set_log_function(grpc_log_to_sf);
}

void sf_grpc_init(void)
{
    pthread_once(&log_once, route_log);
    /* at the level set now (debug shows gRPC's debug lines, otherwise
     * errors only): it may have changed since the last reference (a
     * reload) */
    gpr_set_log_verbosity(sf_log_get_level() <= SF_LOG_DEBUG ? GPR_LOG_SEVERITY_DEBUG
                                                             : GPR_LOG_SEVERITY_ERROR);
    grpc_init();
}

void sf_grpc_shutdown(void)
{
    grpc_shutdown();
}

const char *sf_grpc_status_name(int code)
{
    switch ((grpc_status_code)code) {
    case GRPC_STATUS_OK:                  return "OK";
    case GRPC_STATUS_CANCELLED:           return "CANCELLED";
    case GRPC_STATUS_UNKNOWN:             return "UNKNOWN";
    case GRPC_STATUS_INVALID_ARGUMENT:    return "INVALID_ARGUMENT";
    case GRPC_STATUS_DEADLINE_EXCEEDED:   return "DEADLINE_EXCEEDED";
    case GRPC_STATUS_NOT_FOUND:           return "NOT_FOUND";
    case GRPC_STATUS_ALREADY_EXISTS:      return "ALREADY_EXISTS";
    case GRPC_STATUS_PERMISSION_DENIED:   return "PERMISSION_DENIED";
    case GRPC_STATUS_RESOURCE_EXHAUSTED:  return "RESOURCE_EXHAUSTED";
    case GRPC_STATUS_FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case GRPC_STATUS_ABORTED:             return "ABORTED";
    case GRPC_STATUS_OUT_OF_RANGE:        return "OUT_OF_RANGE";
    case GRPC_STATUS_UNIMPLEMENTED:       return "UNIMPLEMENTED";
    case GRPC_STATUS_INTERNAL:            return "INTERNAL";
    case GRPC_STATUS_UNAVAILABLE:         return "UNAVAILABLE";
    case GRPC_STATUS_DATA_LOSS:           return "DATA_LOSS";
    case GRPC_STATUS_UNAUTHENTICATED:     return "UNAUTHENTICATED";
    default:                              return "status";
    }
}

/* sf_grpc.c: gRPC core references for the gRPC receiver and exporter, and
 * the names of gRPC's status codes. The process-wide part (gRPC's log
 * routed into sf_log) is the core's start-up, sf_process_init(). */
#include "sf_grpc.h"
#include "sf_log.h"
#include "sf_process.h"

#include <grpc/grpc.h>
#include <grpc/status.h>
#include <grpc/support/log.h>

void sf_grpc_init(void)
{
    sf_process_init();      /* once: a component made by hand in a test may come first */
    /* the level may have changed since (a reload) */
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

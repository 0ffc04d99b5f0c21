/* sf_grpc.c: gRPC core references for the gRPC receiver and exporter. The
 * process-wide part (gRPC's log routed into sf_log) is the core's
 * start-up, sf_process_init(). */
#include "sf_grpc.h"
#include "sf_log.h"
#include "sf_process.h"

#include <grpc/grpc.h>
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

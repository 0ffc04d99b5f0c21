/* sf_grpc.c: gRPC core set-up shared by the gRPC receiver and exporter. */
#include "sf_grpc.h"
#include "sf_log.h"

#include <grpc/grpc.h>
#include <grpc/support/log.h>

static void grpc_log_to_sf(gpr_log_func_args *args)
{
    sf_log_level lvl = args->severity == GPR_LOG_SEVERITY_ERROR ? SF_LOG_ERROR
                       : args->severity == GPR_LOG_SEVERITY_INFO ? SF_LOG_INFO : SF_LOG_DEBUG;
    sf_log(lvl, "grpc: %s", args->message);
}

void sf_grpc_init(void)
{
    gpr_set_log_function(grpc_log_to_sf);
    gpr_set_log_verbosity(sf_log_get_level() <= SF_LOG_DEBUG ? GPR_LOG_SEVERITY_DEBUG
                                                             : GPR_LOG_SEVERITY_ERROR);
    grpc_init();
}

void sf_grpc_shutdown(void)
{
    grpc_shutdown();
}

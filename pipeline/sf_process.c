/* sf_process.c: the process-wide library set-up (sf_process.h). */
#include "sf_process.h"
#include "sf_log.h"

#include <pthread.h>

#include <curl/curl.h>
#include <grpc/support/log.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static CURLcode curl_rc = CURLE_FAILED_INIT;

static void grpc_log_to_sf(gpr_log_func_args *args)
{
    sf_log_level lvl = args->severity == GPR_LOG_SEVERITY_ERROR ? SF_LOG_ERROR
                       : args->severity == GPR_LOG_SEVERITY_INFO ? SF_LOG_INFO : SF_LOG_DEBUG;
    sf_log(lvl, "grpc: %s", args->message);
}

static void init_once(void)
{
    /* gRPC's log into sf_log at the level set now (debug shows gRPC's
     * debug lines; otherwise errors only); grpc_init itself is counted
     * per user (sf_grpc.h). */
    gpr_set_log_function(grpc_log_to_sf);
    gpr_set_log_verbosity(sf_log_get_level() <= SF_LOG_DEBUG ? GPR_LOG_SEVERITY_DEBUG
                                                             : GPR_LOG_SEVERITY_ERROR);
    curl_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
    /* libdeflate's allocator is set by its one user, sf_compress.c */
}

sf_status sf_process_init(void)
{
    pthread_once(&once, init_once);
    if (curl_rc != CURLE_OK) {
        sf_error("libcurl initialisation failed: %s", curl_easy_strerror(curl_rc));
        return SF_IO;
    }
    return SF_OK;
}

/* sf_process.c: the process-wide library set-up (sf_process.h). */
#include "sf_process.h"
#include "sf_log.h"

#include <pthread.h>

#include <curl/curl.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static CURLcode curl_rc = CURLE_FAILED_INIT;

static void init_once(void)
{
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

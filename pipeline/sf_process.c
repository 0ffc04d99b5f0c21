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

CURLcode sf_curl_post_options(CURL *c, const char *url, const struct curl_slist *headers,
                              int64_t timeout_ms, curl_write_callback on_reply,
                              curl_xferinfo_callback on_progress, void *ctx)
{
    CURLcode rc;

    if ((rc = curl_easy_setopt(c, CURLOPT_URL, url)) != CURLE_OK ||
        (rc = curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https")) != CURLE_OK ||
        (rc = curl_easy_setopt(c, CURLOPT_POST, 1L)) != CURLE_OK ||
        (rc = curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers)) != CURLE_OK ||
        (rc = curl_easy_setopt(c, CURLOPT_USERAGENT, "spanfence/" SF_VERSION)) != CURLE_OK ||
        (rc = curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)timeout_ms)) != CURLE_OK ||
        (rc = curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)timeout_ms)) != CURLE_OK ||
        (rc = curl_easy_setopt(c, CURLOPT_QUICK_EXIT, 1L)) != CURLE_OK ||
        (rc = curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L)) != CURLE_OK ||
        (rc = curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_reply)) != CURLE_OK ||
        (rc = curl_easy_setopt(c, CURLOPT_WRITEDATA, ctx)) != CURLE_OK ||
        (rc = curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L)) != CURLE_OK ||
        (rc = curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress)) != CURLE_OK)
        return rc;
    return curl_easy_setopt(c, CURLOPT_XFERINFODATA, ctx);
}

/* sf_curl.c: what the exporters' libcurl handles share (sf_curl.h). */
#include "sf_curl.h"
#include "sf_sender.h"
#include "sf_time.h"

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

CURLcode sf_curl_perform(CURLM *multi, CURL *curl, const struct sf_sender *sender,
                         const bool *body_sent, int poll_ms, int grace_ms)
{
    int64_t give_up = 0;
    int running = 1;

    if (curl_multi_add_handle(multi, curl) != CURLM_OK)
        return CURLE_OUT_OF_MEMORY;
    for (;;) {
        CURLMsg *msg;
        int left;

        if (curl_multi_perform(multi, &running) != CURLM_OK)
            return CURLE_OUT_OF_MEMORY;
        if ((msg = curl_multi_info_read(multi, &left)) != NULL && msg->msg == CURLMSG_DONE)
            return msg->data.result;
        if (running == 0)           /* done without a message: cannot happen */
            return CURLE_GOT_NOTHING;
        if (sf_sender_aborting(sender)) {
            int64_t now = sf_now_ms();

            if (!*body_sent)
                return CURLE_ABORTED_BY_CALLBACK;
            if (give_up == 0)
                give_up = now + grace_ms;
            else if (now >= give_up)
                return CURLE_ABORTED_BY_CALLBACK;
        }
        if (curl_multi_poll(multi, NULL, 0, poll_ms, NULL) != CURLM_OK)
            return CURLE_OUT_OF_MEMORY;
    }
}

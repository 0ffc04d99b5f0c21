/* sf_curl.c: what the exporters' libcurl handles share (sf_curl.h). */
#include "sf_curl.h"
#include "sf_alloc.h"
#include "sf_arena.h"
#include "sf_encoding.h"
#include "sf_log.h"
#include "sf_request.h"
#include "sf_sender.h"
#include "sf_time.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

sf_status sf_curl_call_init(sf_curl_call *call, size_t cap)
{
    memset(call, 0, sizeof(*call));
    call->reply = sf_malloc(cap);
    if (call->reply == NULL)
        return SF_ENOMEM;
    call->cap = cap;
    return SF_OK;
}

void sf_curl_call_release(sf_curl_call *call)
{
    sf_free(call->reply);
    memset(call, 0, sizeof(*call));
}

/* The reply, kept up to the call's room; the rest is read and let go. */
static size_t on_reply(char *data, size_t size, size_t n, void *userp)
{
    sf_curl_call *call = userp;
    size_t len = size * n, room = call->cap - call->reply_len;

    memcpy(call->reply + call->reply_len, data, len < room ? len : room);
    call->reply_len += len < room ? len : room;
    return len;
}

/* Notes when the whole body is sent (the server may have the items). */
static int on_progress(void *userp, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    sf_curl_call *call = userp;

    (void)dltotal, (void)dlnow;
    if (ultotal > 0 && ulnow >= ultotal)
        call->body_sent = true;
    return 0;
}

CURLcode sf_curl_post_options(CURL *c, const char *url, const struct curl_slist *headers,
                              int64_t timeout_ms, sf_curl_call *call)
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
        (rc = curl_easy_setopt(c, CURLOPT_WRITEDATA, call)) != CURLE_OK ||
        (rc = curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L)) != CURLE_OK ||
        (rc = curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress)) != CURLE_OK)
        return rc;
    return curl_easy_setopt(c, CURLOPT_XFERINFODATA, call);
}

CURLcode sf_curl_perform(CURLM *multi, CURL *curl, const struct sf_sender *sender,
                         sf_curl_call *call, int poll_ms, int grace_ms)
{
    int64_t give_up = 0;
    int running = 1;

    call->body_sent = false;
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

            if (!call->body_sent)
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

int64_t sf_curl_reply_rejected(const char *id, sf_signal signal, size_t items, const uint8_t *msg,
                               size_t len)
{
    sf_otlp_response *resp;
    int64_t rejected = 0;

    resp = opentelemetry__proto__collector__trace__v1__export_trace_service_response__unpack(
        sf_pb_counted_allocator(), len, msg);
    if (resp == NULL)
        return 0;
    if (resp->partial_success != NULL && resp->partial_success->rejected_spans > 0) {
        const char *m = resp->partial_success->error_message ? resp->partial_success->error_message : "";
        char text[201];

        sf_printable_copy(text, sizeof(text), m, strlen(m));
        rejected = resp->partial_success->rejected_spans;
        sf_warn("exporter %s: server rejected %" PRId64 " of %zu %s: %s", id, rejected, items,
                sf_signal_items(signal), text[0] ? text : "(no message)");
    }
    opentelemetry__proto__collector__trace__v1__export_trace_service_response__free_unpacked(
        resp, sf_pb_counted_allocator());
    return rejected;
}

sf_status sf_curl_header_add(struct curl_slist **list, const char *name, const char *value,
                             bool send_empty)
{
    size_t len = strlen(name) + strlen(value) + 3;
    char *line = sf_malloc(len);
    struct curl_slist *l;

    if (line == NULL)
        return SF_ENOMEM;
    snprintf(line, len, value[0] || !send_empty ? "%s: %s" : "%s;", name, value);
    l = curl_slist_append(*list, line);   /* copies */
    explicit_bzero(line, len);
    sf_free(line);
    if (l == NULL)
        return SF_ENOMEM;
    *list = l;
    return SF_OK;
}

void sf_curl_headers_free(struct curl_slist *list)
{
    for (struct curl_slist *p = list; p != NULL; p = p->next)
        explicit_bzero(p->data, strlen(p->data));
    curl_slist_free_all(list);
}

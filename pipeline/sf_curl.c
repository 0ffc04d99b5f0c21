/* sf_curl.c: what the exporters over libcurl share (sf_curl.h): their
 * context's common part and lifecycle, their workers' handles, the POST's
 * options and the call's transfer loop. */
#include "sf_curl.h"
#include "sf_alloc.h"
#include "sf_arena.h"
#include "sf_encoding.h"
#include "sf_libcurl.h"
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

/* ---- an exporter's context and workers ----------------------------------- */

sf_status sf_curl_export_create(sf_component *self, size_t ctx_size, size_t worker_size,
                                void (*worker_release)(void *worker), int compression,
                                const sf_compression_params *params, int64_t timeout_ms,
                                const sf_queue_config *q, const sf_retry_config *r,
                                sf_send_fn send)
{
    sf_curl_export *x;

    /* libcurl is loaded when a component needs it (sf_libcurl.h): a
     * missing one is a config-time error */
    if (sf_libcurl_load() != SF_OK) {
        sf_error("exporter %s: %s", sf_component_id(self), sf_libcurl_error());
        return SF_IO;
    }
    x = sf_calloc(1, ctx_size);
    if (x == NULL)
        return SF_ENOMEM;
    x->id = sf_component_id(self);
    x->signal = sf_component_signal(self);
    x->counters = sf_component_counters(self);
    x->compression = (sf_compression)compression;
    x->level = sf_compression_level(x->compression, params);
    x->timeout_ms = timeout_ms;
    x->out.drain_ms = timeout_ms < SF_CURL_DRAIN_MAX_MS ? timeout_ms : SF_CURL_DRAIN_MAX_MS;
    x->out.send_timeout_ms = timeout_ms;
    x->worker_size = worker_size;
    x->worker_release = worker_release;
    x->out.sender = sf_sender_create(x->id, q, r, send, x, x->counters);
    if (x->out.sender == NULL)
        goto out_free_ctx;
    x->n_workers = sf_sender_workers(x->out.sender);
    x->workers = sf_calloc(x->n_workers, worker_size);
    if (x->workers == NULL)
        goto out_destroy_sender;
    sf_component_set_ctx(self, x);
    return SF_OK;

out_destroy_sender:
    sf_sender_destroy(x->out.sender);
out_free_ctx:
    sf_free(x);
    return SF_ENOMEM;
}

void *sf_curl_export_worker(const sf_curl_export *x, unsigned i)
{
    return (char *)x->workers + (size_t)i * x->worker_size;
}

void sf_curl_export_destroy(sf_component *self)
{
    sf_curl_export *x = sf_component_ctx(self);

    if (x == NULL)
        return;
    sf_sender_destroy(x->out.sender);   /* joins the consumers: no call in flight after */
    for (unsigned i = 0; i < x->n_workers; i++) {
        void *w = sf_curl_export_worker(x, i);

        sf_curl_worker_release(w);
        if (x->worker_release != NULL)
            x->worker_release(w);
    }
    sf_free(x->workers);
    sf_curl_headers_free(x->headers);
    curl_slist_free_all(x->connect_to);
    sf_free(x->url);
    sf_free(x);
    sf_component_set_ctx(self, NULL);
}

sf_status sf_curl_worker_init(sf_curl_worker *w, const sf_curl_export *x, size_t reply_cap)
{
    if (sf_curl_call_init(&w->call, reply_cap) != SF_OK)
        goto out_release;
    if (x->compression != SF_COMPRESSION_NONE &&
        (w->zc = sf_compressor_create(x->compression, x->level)) == NULL)
        goto out_release;
    w->curl = curl_easy_init();
    if (w->curl == NULL)
        goto out_release;
    /* Fixed per handle; only the body changes per call. */
    if (sf_curl_post_options(w->curl, x->url, x->headers, x->timeout_ms, &w->call) != CURLE_OK ||
        (x->connect_to != NULL &&
         curl_easy_setopt(w->curl, CURLOPT_CONNECT_TO, x->connect_to) != CURLE_OK))
        goto out_release;
    w->multi = curl_multi_init();
    if (w->multi == NULL)
        goto out_release;
    return SF_OK;

out_release:
    sf_curl_worker_release(w);
    return SF_ENOMEM;
}

void sf_curl_worker_release(sf_curl_worker *w)
{
    if (w->multi != NULL)
        curl_multi_cleanup(w->multi);
    w->multi = NULL;
    if (w->curl != NULL)
        curl_easy_cleanup(w->curl);
    w->curl = NULL;
    sf_compressor_destroy(w->zc);
    w->zc = NULL;
    sf_curl_call_release(&w->call);
}

sf_status sf_curl_worker_compress(sf_curl_worker *w, sf_compression compression, const sf_buf *buf,
                                  const uint8_t **body, size_t *len, sf_send_result *res)
{
    sf_status st;

    *body = buf->data;
    *len = buf->len;
    if (w->zc == NULL)
        return SF_OK;
    st = sf_compressor_run(w->zc, buf->data, buf->len, body, len);
    if (st != SF_OK)
        snprintf(res->detail, sizeof(res->detail), "%s: %s", sf_compression_name(compression),
                 sf_status_str(st));
    return st;
}

struct curl_slist *sf_curl_connect_to(const char *name, const char *host, size_t host_len,
                                      const char *port)
{
    size_t len = strlen(name) + host_len + 2 * strlen(port) + 4;
    char *line = sf_malloc(len);
    struct curl_slist *ct;

    if (line == NULL)
        return NULL;
    snprintf(line, len, "%s:%s:%.*s:%s", name, port, (int)host_len, host, port);
    ct = curl_slist_append(NULL, line);     /* copies */
    sf_free(line);
    return ct;
}

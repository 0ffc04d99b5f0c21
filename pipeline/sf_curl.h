/* sf_curl.h: what the exporters over libcurl share (otlphttp's POST, otlp's
 * gRPC call): the context's common part and its lifecycle, a worker's
 * handles, the options of an OTLP POST, the bounded reply of a call, and
 * the transfer loop that honours the sender's shutdown drain.
 * libcurl's global init is the process's (sf_process.h). */
#ifndef SF_CURL_H
#define SF_CURL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

#include "sf_compress.h"
#include "sf_sender.h"
#include "sf_signal.h"
#include "sf_status.h"

/* What one call of an exporter worker brings back, embedded in the worker:
 * the reply, kept up to `cap` bytes (a longer one is cut, and reply_len is
 * then cap: a caller reads only a reply_len below cap), and whether the
 * body went out whole (the server may have the items). */
typedef struct sf_curl_call {
    uint8_t *reply;             /* cap bytes */
    size_t cap;
    size_t reply_len;           /* the caller empties it before each call */
    bool body_sent;             /* set by sf_curl_perform */
} sf_curl_call;

/* The reply buffer of `cap` bytes; SF_ENOMEM. _release frees it (and may
 * be called on a call that failed or never began). */
sf_status sf_curl_call_init(sf_curl_call *call, size_t cap);
void sf_curl_call_release(sf_curl_call *call);

/* One sender consumer's handles, first in the exporter's worker (which
 * adds its wire's state): the easy handle (kept, so its connection is
 * reused), the multi handle that drives it (so a call can be cut short),
 * the compressor (NULL without compression) and the call's reply. */
typedef struct sf_curl_worker {
    CURL *curl;
    CURLM *multi;
    sf_compressor *zc;
    sf_curl_call call;
} sf_curl_worker;

/* What every libcurl exporter's context holds, first in it (so `out` is
 * first, as sf_sender_export_* want). Written by create (and the otlp
 * exporter's start); read-only while the consumers run. */
typedef struct sf_curl_export {
    sf_sender_export out;       /* first: the sender's component side (sf_sender.h) */
    const char *id;
    sf_signal signal;           /* of the pipelines this instance serves */
    sf_counters *counters;
    char *url;
    struct curl_slist *headers; /* holds secrets: wiped before freeing */
    struct curl_slist *connect_to;  /* server_name_override: "NAME:PORT:HOST:PORT"; or NULL */
    sf_compression compression;
    int level;
    int64_t timeout_ms;
    unsigned n_workers;
    void *workers;              /* n_workers of worker_size bytes, each an sf_curl_worker first */
    size_t worker_size;
    void (*worker_release)(void *worker);   /* the exporter's part of a worker, or NULL */
} sf_curl_export;

/* The longest the shutdown drain of a libcurl exporter may take, whatever
 * its timeout. */
#define SF_CURL_DRAIN_MAX_MS 5000

/* Creates exporter `self`'s context, `ctx_size` bytes zeroed with an
 * sf_curl_export first, and sets it as the component's: loads libcurl (a
 * missing one is a config-time error, said here: SF_IO), fills the common
 * part from the config's compression, `timeout_ms` (already defaulted) and
 * queue, creates the sender (calling `send` on its consumers with the
 * context) and the zeroed workers of `worker_size` bytes, whose own part
 * `worker_release` frees (it may be NULL). On error (SF_IO, SF_ENOMEM)
 * nothing is left and the component has no context; on SF_OK
 * sf_component_ctx(self) is the context. */
sf_status sf_curl_export_create(sf_component *self, size_t ctx_size, size_t worker_size,
                                void (*worker_release)(void *worker), int compression,
                                const sf_compression_params *params, int64_t timeout_ms,
                                const sf_queue_config *q, const sf_retry_config *r,
                                sf_send_fn send);
/* Worker `i` of `x`. */
void *sf_curl_export_worker(const sf_curl_export *x, unsigned i);
/* The component's destroy, also after a failed create or start: destroys
 * the sender (joining its consumers: no call in flight after), releases
 * every worker (sf_curl_worker_release, then the exporter's part), frees
 * the URL, the headers (wiped) and the context. */
void sf_curl_export_destroy(sf_component *self);

/* The common part of a worker of `x`: the reply of `reply_cap` bytes, the
 * compressor, the easy handle with the POST's options (sf_curl_post_options)
 * and connect_to, and the multi handle. The exporter then adds its own
 * options. SF_ENOMEM, with `w` released. */
sf_status sf_curl_worker_init(sf_curl_worker *w, const sf_curl_export *x, size_t reply_cap);
/* Frees what _init made; safe on a worker never or partly made, and twice. */
void sf_curl_worker_release(sf_curl_worker *w);
/* The body of `buf` compressed by the worker's compressor into *body and
 * *len, or `buf`'s own without one. On error the status (SF_ENOMEM or
 * the compressor's) with res->detail said; the caller sets res->status. */
sf_status sf_curl_worker_compress(sf_curl_worker *w, sf_compression compression, const sf_buf *buf,
                                  const uint8_t **body, size_t *len, sf_send_result *res);

/* The CURLOPT_CONNECT_TO list sending a connection for `name` (the
 * server_name_override) to `host` (`host_len` bytes) at `port`: libcurl
 * takes the SNI name and the one the certificate is checked against from
 * the URL, so the URL names `name` and this sends it to the endpoint.
 * NULL on no memory. */
struct curl_slist *sf_curl_connect_to(const char *name, const char *host, size_t host_len,
                                      const char *port);

/* The options every exporter's libcurl handle shares: a POST to `url`
 * (http or https only) with `headers`, spanfence's user agent, one
 * timeout for connecting and for the whole call, no signals, a quick
 * exit, the reply into `call` and the progress of its body noted there
 * (how a call is cut short at shutdown). Never CURLOPT_VERBOSE: it prints
 * request headers, tokens included. The first failing option's code. */
CURLcode sf_curl_post_options(CURL *c, const char *url, const struct curl_slist *headers,
                              int64_t timeout_ms, sf_curl_call *call);

/* One transfer of `curl` on the exporter worker's `multi`, bounded by the
 * handle's CURLOPT_TIMEOUT_MS. Once `sender`'s shutdown drain time is over
 * (sf_sender_aborting) it ends within poll_ms, CURLE_ABORTED_BY_CALLBACK,
 * unless the body is sent whole (call->body_sent, which this clears first
 * and the handle's progress sets): then it may wait grace_ms more for the
 * reply, so items the server took are counted sent, not dropped. The
 * handle stays on `multi`: the caller removes it (after what it must do to
 * a cut-short call). */
struct sf_sender;
CURLcode sf_curl_perform(CURLM *multi, CURL *curl, const struct sf_sender *sender,
                         sf_curl_call *call, int poll_ms, int grace_ms);

/* The items the server says it rejected in `msg` (`len` bytes), the OTLP
 * Export response of a call (partial_success: one layout for every
 * signal), warned about as exporter `id`'s with the `items` the call sent;
 * 0 when the response says none or does not decode. The caller has
 * unwrapped the message (the gRPC exporter its frame). */
int64_t sf_curl_reply_rejected(const char *id, sf_signal signal, size_t items, const uint8_t *msg,
                               size_t len);

/* Appends the header `name: value` to *list (libcurl copies it; the copy
 * made here is wiped: values may be credentials). An empty value is sent
 * empty ("name;") when send_empty, else "name:" disables libcurl's own
 * header of that name (Expect). SF_ENOMEM, *list unchanged. */
sf_status sf_curl_header_add(struct curl_slist **list, const char *name, const char *value,
                             bool send_empty);
/* Wipes every header (they may hold credentials) and frees the list. */
void sf_curl_headers_free(struct curl_slist *list);

#endif

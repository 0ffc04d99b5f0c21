/* sf_curl.h: what the exporters' libcurl handles share: the options of an
 * OTLP POST, the bounded reply of a call, and the transfer loop that
 * honours the sender's shutdown drain.
 * libcurl's global init is the process's (sf_process.h). */
#ifndef SF_CURL_H
#define SF_CURL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

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

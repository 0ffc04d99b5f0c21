/* sf_curl.h: what the exporters' libcurl handles share: the options of an
 * OTLP POST and the transfer loop that honours the sender's shutdown drain.
 * libcurl's global init is the process's (sf_process.h). */
#ifndef SF_CURL_H
#define SF_CURL_H

#include <stdbool.h>
#include <stdint.h>

#include <curl/curl.h>

#include "sf_status.h"

/* The options every exporter's libcurl handle shares: a POST to `url`
 * (http or https only) with `headers`, spanfence's user agent, one
 * timeout for connecting and for the whole call, no signals, a quick
 * exit, the reply to on_reply(ctx) and progress to on_progress(ctx) (how
 * a call is cut short at shutdown). Never CURLOPT_VERBOSE: it prints
 * request headers, tokens included. The first failing option's code. */
CURLcode sf_curl_post_options(CURL *c, const char *url, const struct curl_slist *headers,
                              int64_t timeout_ms, curl_write_callback on_reply,
                              curl_xferinfo_callback on_progress, void *ctx);

/* One transfer of `curl` on the exporter worker's `multi`, bounded by the
 * handle's CURLOPT_TIMEOUT_MS. Once `sender`'s shutdown drain time is over
 * (sf_sender_aborting) it ends within poll_ms, CURLE_ABORTED_BY_CALLBACK,
 * unless the body is sent whole (*body_sent, set by the caller's progress
 * callback): then it may wait grace_ms more for the reply, so items the
 * server took are counted sent, not dropped. The handle stays on `multi`:
 * the caller removes it (after what it must do to a cut-short call). */
struct sf_sender;
CURLcode sf_curl_perform(CURLM *multi, CURL *curl, const struct sf_sender *sender,
                         const bool *body_sent, int poll_ms, int grace_ms);

/* Appends the header `name: value` to *list (libcurl copies it; the copy
 * made here is wiped: values may be credentials). An empty value is sent
 * empty ("name;") when send_empty, else "name:" disables libcurl's own
 * header of that name (Expect). SF_ENOMEM, *list unchanged. */
sf_status sf_curl_header_add(struct curl_slist **list, const char *name, const char *value,
                             bool send_empty);
/* Wipes every header (they may hold credentials) and frees the list. */
void sf_curl_headers_free(struct curl_slist *list);

#endif

/* sf_sender.h: the bounded in-memory sending queue and capped retries that
 * every network exporter shares (otlphttp and otlp): one implementation, so
 * the rules cannot drift between them.
 *
 * An exporter submits encoded, filtered batches (sf_buf); `num_consumers`
 * threads take them from the queue and call the exporter's send function,
 * retrying with exponential backoff (honouring a server's retry-after) until
 * `max_elapsed_time`. Submitting never blocks: a full queue refuses with
 * SF_FULL and counts the spans as enqueue-failed. Every span submitted ends
 * as sent or as send-failed with a reason; while in the queue it is counted
 * in queued_spans. */
#ifndef SF_SENDER_H
#define SF_SENDER_H

#include <stdbool.h>
#include <stdint.h>

#include "sf_component.h"
#include "sf_request.h"
#include "sf_config.h"
#include "sf_metrics.h"
#include "sf_status.h"

/* What sending_queue.queue_size (and sending_queue.batch's sizes) count:
 * upstream's `sizer` choices, in its order. */
typedef enum sf_sizer {
    SF_SIZER_REQUESTS,              /* incoming batches */
    SF_SIZER_ITEMS,                 /* spans */
    SF_SIZER_BYTES                  /* encoded bytes */
} sf_sizer;

/* sending_queue.batch: merging queued batches into fewer requests while
 * exports are in flight (on by default in spanfence; see sf_batching). */
typedef struct sf_queue_batch_config {
    bool present;
    bool enabled;
    int64_t flush_timeout;          /* ms */
    int64_t min_size;               /* in `sizer` units */
    int64_t max_size;               /* in `sizer` units; 0: only SF_SENDER_MERGE_MAX_BYTES */
    int sizer;                      /* sf_sizer */
} sf_queue_batch_config;

typedef struct sf_queue_config {
    bool present;
    bool enabled;
    int sizer;                      /* sf_sizer */
    int64_t queue_size;             /* in `sizer` units */
    int64_t num_consumers;
    sf_queue_batch_config batch;
} sf_queue_config;

typedef struct sf_retry_config {
    bool present;
    bool enabled;
    int64_t initial_interval;       /* ms */
    double multiplier;
    double randomization_factor;
    int64_t max_interval;           /* ms */
    int64_t max_elapsed_time;       /* ms; 0 = retry forever */
} sf_retry_config;

/* Config rows for `sending_queue` (with its `batch`) and `retry_on_failure`, relative to the
 * structs above: use them as the `sub` of SF_CFG_SECTION rows. */
extern const sf_config_row sf_sending_queue_rows[];
extern const sf_config_row sf_retry_rows[];
/* The rows' defaults as structs, for a section neither given nor filled
 * from the rows (a config struct built by hand); beside the rows in
 * sf_sender_config.c, and held equal to them by its test. */
extern const sf_queue_config sf_sending_queue_defaults;
extern const sf_retry_config sf_retry_defaults;
/* Exporters' check: warn about a sending_queue.batch.min_size the queue
 * can never hold (same sizer and min_size > queue_size; a queue of
 * requests and a min_size in items that calls of 512 spans, the OTel SDKs'
 * largest export by default, could not fill). Merging then still works
 * (the gatherer drains the queue as it fills), but requests stay below
 * min_size. Warnings only: always SF_OK. */
sf_status sf_sending_queue_check(sf_cfg_ctx *ctx, const sf_queue_config *q);

/* What one send attempt came to. */
typedef struct sf_send_result {
    sf_status status;               /* SF_OK, SF_RETRY (retryable) or SF_PERMANENT */
    int64_t retry_after_ms;         /* server's hint, 0 for none */
    /* With SF_OK: spans the server refused for good (OTLP partial_success);
     * counted as send-failed (permanent_error), the rest as sent. */
    int64_t rejected_spans;
    char detail[128];               /* for the log: "http 503", "connection refused" */
} sf_send_result;

/* Batching (the `batch` processor's settings, applied where the data is
 * already safe: in the consumers). A consumer that pops a batch of fewer
 * than send_batch_size spans keeps taking queued batches, waiting at most
 * timeout_ms after the first, while the total stays <= send_batch_max_size,
 * then sends them concatenated as ONE request (two encoded
 * ExportTraceServiceRequests back to back are one request holding both).
 * Unlike upstream, a batch is never split: a single queued batch larger than
 * send_batch_max_size is sent as it is. No merged request passes
 * SF_SENDER_MERGE_MAX_BYTES.
 * Without a batch processor, sending_queue.batch merges (on by default): a
 * consumer takes the oldest batch and every batch already queued behind it
 * (up to max_size and the byte cap); when that is under min_size and the
 * exporter is busy (another export in flight, or the last one formed less
 * than flush_timeout ago), it waits for more, up to flush_timeout after the
 * first. So a lone batch on an idle exporter goes at once, and what
 * arrives while exports are in flight, or in a steady stream, shares the
 * next request. The
 * receiver's answer never waits for any of it: it is given once the batch
 * is queued. */
typedef struct sf_batching {
    int64_t send_batch_size;        /* spans that end the wait; 0: take what is queued, no wait */
    int64_t send_batch_max_size;    /* most spans in a merged request; 0: no limit */
    int64_t timeout_ms;             /* longest wait after the first batch; 0: no wait */
    /* where the requests formed are counted (the batch processor's
     * series, sf_metrics.h), or NULL; outlives the sender */
    sf_batch_stats *stats;
} sf_batching;

/* The most bytes one merged request carries (before compression): under
 * gRPC's default 4 MiB message limit, which a gateway's OTLP/gRPC receiver
 * keeps unless told otherwise, and under upstream's 20 MiB HTTP body. */
#define SF_SENDER_MERGE_MAX_BYTES (4000000)

/* Called on a consumer thread; `worker` is the consumer's index (0..n-1),
 * so the exporter can keep one connection handle per consumer. */
typedef void (*sf_send_fn)(void *exporter, unsigned worker, const sf_buf *buf,
                           sf_send_result *result);

typedef struct sf_sender sf_sender;

/* Create (no threads yet). `id` names the exporter in logs; `counters`
 * receives sent/failed/queue figures. NULL on no memory. */
sf_sender *sf_sender_create(const char *id, const sf_queue_config *q, const sf_retry_config *r,
                            sf_send_fn send, void *exporter, sf_counters *counters);
/* Merge queued batches into fewer requests (see sf_batching); call before
 * start. No effect with the queue disabled (each submit is sent at once). */
void sf_sender_set_batching(sf_sender *s, const sf_batching *b);
/* Spawn the consumers. SF_ENOMEM when a thread or the batching buffers
 * cannot be had (nothing is left running then). */
sf_status sf_sender_start(sf_sender *s);
/* Queue `buf` (the sender takes a new reference of its own on SF_OK; the
 * caller keeps its reference either way). SF_FULL when the queue is full,
 * SF_STOPPED after shutdown began. With the queue disabled, sends
 * synchronously on the caller's thread, once, without retries, and returns
 * SF_OK / SF_RETRY / SF_PERMANENT: this BLOCKS the caller for the whole
 * request, and concurrent callers take turns (they share worker 0). */
sf_status sf_sender_submit(sf_sender *s, sf_buf *buf);
/* An exporter's consume(): queue the batch's current encoded bytes (a batch
 * with no spans is not sent). Statuses as sf_sender_submit, plus SF_ENOMEM
 * when the batch cannot be encoded. The caller keeps the batch. */
sf_status sf_sender_submit_request(sf_sender *s, sf_request *batch);
/* Stop taking batches, let consumers drain the queue for up to `drain_ms`,
 * then count what is left as dropped (reason shutdown) and join threads. */
void sf_sender_shutdown(sf_sender *s, int64_t drain_ms);
void sf_sender_destroy(sf_sender *s);

/* Reload (SIGHUP): batches an exporter keeps for its successor instead of
 * sending them within the drain time or dropping them.
 * sf_sender_suspend: refuse new batches, let the sends in flight end (for
 * up to `wait_ms`, then as at shutdown), stop the consumers, and hand back
 * every batch not sent (in a retry, merged or still queued, oldest first)
 * (still counted as queued here: this sender's counts stay consistent). NULL with the queue disabled (then
 * it is a plain shutdown). The sender is then only destroyed.
 * sf_sender_adopt: before start, take a parcel: its batches are counted as
 * queued here and sent before anything queued later.
 * sf_sender_parcel_drop: free one nobody took; with `counters`, count its
 * spans as send-failed (shutdown) there. */
typedef struct sf_sender_parcel sf_sender_parcel;
sf_sender_parcel *sf_sender_suspend(sf_sender *s, int64_t wait_ms);
void sf_sender_adopt(sf_sender *s, sf_sender_parcel *p);
void sf_sender_parcel_drop(sf_sender_parcel *p, sf_counters *counters);

/* How many distinct `worker` values the send function will see:
 * num_consumers, or 1 with the queue disabled. Valid after create. */
unsigned sf_sender_workers(const sf_sender *s);
/* Merged requests' buffers idle between requests (kept warm for the next
 * one, whichever consumer forms it): at most sf_sender_workers(). */
size_t sf_sender_idle_merge_buffers(sf_sender *s);
/* The longest one send may take (the exporter's timeout), the bound the
 * watchdog holds a send to; 0: not known (5 min). Before start. */
void sf_sender_set_send_timeout(sf_sender *s, int64_t ms);
/* Whether a consumer of some running sender (process-wide) has been in one
 * send or one backoff for `slack_ms` longer than it may be (the send
 * timeout; the backoff's wait): a stuck pipeline. Says which in `why`. Any
 * thread; what systemd's watchdog is fed on (pipeline/cli/main.c). */
bool sf_sender_stalled(int64_t slack_ms, char *why, size_t size);
/* True once the shutdown drain deadline has passed: a send function doing
 * a long request may poll it and give up early (the batch is then counted
 * as dropped at shutdown whatever the send returns). */
bool sf_sender_aborting(const sf_sender *s);

/* The component side of a network exporter, the same for every one: an
 * exporter whose context (sf_component_ctx) begins with this struct, as its
 * first member, filled at create, uses the functions below as its type's
 * start (or calls sf_sender_export_start at the end of its own), consume,
 * shutdown, suspend and resume. */
typedef struct sf_sender_export {
    sf_sender *sender;
    int64_t drain_ms;               /* shutdown and reload: time the queue may drain */
    int64_t send_timeout_ms;        /* the exporter's timeout (sf_sender_set_send_timeout) */
} sf_sender_export;

/* The batching a pipeline's processor asks for (sf_component_batching),
 * then the consumers. */
sf_status sf_sender_export_start(sf_component *self);
/* Receiver threads: queue the batch's encoded bytes (sf_sender_submit_request);
 * SF_FULL passes through, and the receiver tells its client to retry. */
sf_status sf_sender_export_consume(sf_component *self, sf_request *batch);
/* Drain for drain_ms, then count what is left as dropped. */
void sf_sender_export_shutdown(sf_component *self);
/* Reload: the batches not sent yet go to the instance of the same id in
 * the new config (sf_sender_suspend / sf_sender_adopt) instead of being
 * dropped when the drain time is over; with no such instance (self NULL)
 * they are freed uncounted, as the old instance still counts them. */
void *sf_sender_export_suspend(sf_component *self);
void sf_sender_export_resume(sf_component *self, void *parcel);

#endif

/* sf_sender_config.c: config rows of `sending_queue` and `retry_on_failure`,
 * shared by every network exporter: the keys and defaults of upstream's
 * exporterhelper as documented from the releases that have
 * `sending_queue.sizer` and `sending_queue.batch`, except that the batch
 * merges by default (upstream: no batching unless `batch` is given) and
 * counts in items unless told bytes. `storage` is refused: spanfence never
 * writes spans to disk. */
#include "sf_sender.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>

static const sf_config_row queue_batch_rows[] = {
    { .key = "enabled", .type = SF_CFG_BOOL, .def = "true",
      .offset = offsetof(sf_queue_batch_config, enabled),
      .help = "merge queued batches into fewer requests while exports are in flight "
              "(spanfence's key; a batch processor's settings replace these)" },
    { .key = "flush_timeout", .type = SF_CFG_DURATION, .def = "200ms",
      .offset = offsetof(sf_queue_batch_config, flush_timeout),
      .help = "longest a request waits for more batches while another export is in flight",
      .min = 0, .max = 3600000 },
    { .key = "min_size", .type = SF_CFG_INT, .def = "8192",
      .offset = offsetof(sf_queue_batch_config, min_size),
      .help = "size (in batch.sizer units) that ends the wait for more batches",
      .min = 0, .max = INT32_MAX },
    { .key = "max_size", .type = SF_CFG_INT, .def = "0",
      .offset = offsetof(sf_queue_batch_config, max_size),
      .help = "most merged into one request, in batch.sizer units; 0: no limit but 4 MB "
              "(a larger batch is sent whole, never split)",
      .min = 0, .max = INT32_MAX },
    { .key = "sizer", .type = SF_CFG_ENUM, .def = "items",
      .offset = offsetof(sf_queue_batch_config, sizer), .choices = "requests|items|bytes",
      .help = "what min_size and max_size count: incoming batches, spans or encoded bytes" },
    { .key = "partition", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD,
      .help = "batching per client metadata value" },
    { 0 }
};

const sf_config_row sf_sending_queue_rows[] = {
    { .key = "enabled", .type = SF_CFG_BOOL, .def = "true",
      .offset = offsetof(sf_queue_config, enabled),
      .help = "queue batches in memory and send them from consumer threads" },
    { .key = "sizer", .type = SF_CFG_ENUM, .def = "requests",
      .offset = offsetof(sf_queue_config, sizer), .choices = "requests|items|bytes",
      .help = "what queue_size counts: incoming batches, spans or encoded bytes" },
    { .key = "queue_size", .type = SF_CFG_INT, .def = "1000",
      .offset = offsetof(sf_queue_config, queue_size),
      .help = "most held, in sizer units; a full queue refuses new batches (counted)",
      .min = 1, .max = INT64_C(1) << 40 },
    { .key = "num_consumers", .type = SF_CFG_INT, .def = "10",
      .offset = offsetof(sf_queue_config, num_consumers),
      .help = "consumer threads sending from the queue", .min = 1, .max = 256 },
    { .key = "batch", .type = SF_CFG_SECTION, .offset = offsetof(sf_queue_config, batch),
      .sub = queue_batch_rows, .help = "merging of queued batches into fewer requests" },
    { .key = "storage", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "persistent queue storage is not supported: spanfence never writes spans to disk" },
    { 0 }
};

const sf_config_row sf_retry_rows[] = {
    { .key = "enabled", .type = SF_CFG_BOOL, .def = "true",
      .offset = offsetof(sf_retry_config, enabled), .help = "retry failed sends" },
    { .key = "initial_interval", .type = SF_CFG_DURATION, .def = "5s",
      .offset = offsetof(sf_retry_config, initial_interval),
      .help = "wait before the first retry", .min = 1, .max = 3600000 },
    { .key = "multiplier", .type = SF_CFG_DOUBLE, .def = "1.5",
      .offset = offsetof(sf_retry_config, multiplier),
      .help = "backoff growth per retry", .dmin = 1.0, .dmax = 100.0 },
    { .key = "randomization_factor", .type = SF_CFG_DOUBLE, .def = "0.5",
      .offset = offsetof(sf_retry_config, randomization_factor),
      .help = "jitter, as a fraction of the interval", .dmin = 0.0, .dmax = 1.0 },
    { .key = "max_interval", .type = SF_CFG_DURATION, .def = "30s",
      .offset = offsetof(sf_retry_config, max_interval),
      .help = "longest wait between retries", .min = 1, .max = 3600000 },
    { .key = "max_elapsed_time", .type = SF_CFG_DURATION, .def = "300s",
      .offset = offsetof(sf_retry_config, max_elapsed_time),
      .help = "give up on a batch (drop and count it) after this long; 0 retries forever",
      .min = 0, .max = 86400000 },
    { 0 }
};

/* The defaults above, as the sender takes them when a section was not
 * decoded (tests/pipeline/test_sender_config holds the two equal). */
const sf_queue_config sf_sending_queue_defaults = {
    .enabled = true, .sizer = SF_SIZER_REQUESTS, .queue_size = 1000, .num_consumers = 10,
    .batch = { .enabled = true, .flush_timeout = 200, .min_size = 8192, .max_size = 0,
               .sizer = SF_SIZER_ITEMS },
};

const sf_retry_config sf_retry_defaults = {
    .enabled = true, .initial_interval = 5000, .multiplier = 1.5,
    .randomization_factor = 0.5, .max_interval = 30000, .max_elapsed_time = 300000,
};

/* The OTel SDKs' largest export by default (BatchSpanProcessor's
 * max_export_batch_size): a queue of requests holds at most this many
 * spans a request from an engine using one. */
#define SDK_MAX_EXPORT_BATCH 512

sf_status sf_sending_queue_check(sf_cfg_ctx *ctx, const sf_queue_config *q)
{
    static const char *const units[] = { "requests", "items", "bytes" };
    const sf_node *queue = sf_node_get(sf_cfg_value(ctx), "sending_queue");
    const sf_node *batch = sf_node_get(queue, "batch");
    const sf_node *at = sf_node_get(batch, "min_size");
    const sf_queue_batch_config *b = &q->batch;
    int64_t holds;

    if (!q->present || !q->enabled || !b->enabled || b->min_size <= 0 ||
        q->sizer < SF_SIZER_REQUESTS || q->sizer > SF_SIZER_BYTES)
        return SF_OK;
    if (at == NULL)
        at = batch != NULL ? batch : queue != NULL ? queue : sf_cfg_node(ctx);
    if (b->sizer == q->sizer && b->min_size > q->queue_size) {
        sf_cfg_warn(ctx, at, "sending_queue.batch.min_size",
                    "min_size %" PRId64 " %s is more than the queue holds (queue_size %" PRId64
                    " %s): merged requests never reach it (they are sent at flush_timeout); "
                    "lower min_size or raise queue_size",
                    b->min_size, units[b->sizer], q->queue_size, units[q->sizer]);
        return SF_OK;
    }
    holds = q->queue_size <= INT64_MAX / SDK_MAX_EXPORT_BATCH ?
            q->queue_size * SDK_MAX_EXPORT_BATCH : INT64_MAX;
    if (q->sizer == SF_SIZER_REQUESTS && b->sizer == SF_SIZER_ITEMS && b->min_size > holds)
        sf_cfg_warn(ctx, at, "sending_queue.batch.min_size",
                    "min_size %" PRId64 " spans is more than a queue of %" PRId64 " requests "
                    "holds with calls of %d spans (the OTel SDKs' largest by default): merged "
                    "requests never reach it (they are sent at flush_timeout); lower min_size "
                    "or raise queue_size",
                    b->min_size, q->queue_size, SDK_MAX_EXPORT_BATCH);
    return SF_OK;
}

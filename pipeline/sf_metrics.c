/* sf_metrics.c: reason labels, and the Prometheus text of every
 * component's counters (upstream's metric names, then each type's own
 * rows), rendered afresh for each scrape of the monitoring server's
 * /metrics (sf_monitor.c). */
#include "sf_metrics.h"
#include "sf_alloc.h"
#include "sf_dynbuf.h"
#include "sf_log.h"
#include "sf_share.h"
#include "sf_time.h"
#include "internal/sf_core.h"
#include "internal/sf_metrics_render.h"

#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#ifndef SF_VERSION
#define SF_VERSION "0.0.0"
#endif

uint64_t sf_reasons_sum(const uint64_t v[SF_REASON_COUNT])
{
    uint64_t n = 0;

    for (int r = 0; r < SF_REASON_COUNT; r++)
        n += v[r];
    return n;
}

const char *sf_reason_label(sf_reason r)
{
    switch (r) {
#define SF_REASON_LABEL(e, label) case SF_REASON_##e: return label;
    SF_REASON_MAP(SF_REASON_LABEL)
#undef SF_REASON_LABEL
    case SF_REASON_COUNT:
        break;
    }
    return "unknown";
}

/* ---- the batch processor's series ---------------------------------------- */

/* upstream v0.120 processor/batchprocessor/metadata.yaml's boundaries */
static const uint64_t batch_size_bounds[SF_BATCH_SIZE_BOUNDS] = {
    10, 25, 50, 75, 100, 250, 500, 750, 1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000,
    10000, 20000, 30000, 50000, 100000
};
static const uint64_t batch_bytes_bounds[SF_BATCH_BYTES_BOUNDS] = {
    10, 25, 50, 75, 100, 250, 500, 750, 1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000,
    10000, 20000, 30000, 50000, 100000, 200000, 300000, 400000, 500000, 600000, 700000, 800000,
    900000, 1000000, 2000000, 3000000, 4000000, 5000000, 6000000, 7000000, 8000000, 9000000
};

/* The bucket of `v`: the first bound >= v (Prometheus' `le`), else +Inf. */
static size_t bucket_of(const uint64_t *bounds, size_t n, uint64_t v)
{
    size_t lo = 0, hi = n;

    while (lo < hi) {
        size_t mid = (lo + hi) / 2;

        if (bounds[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void sf_batch_stats_record(sf_batch_stats *s, sf_batch_trigger trigger, uint64_t items,
                           uint64_t bytes)
{
    if (s == NULL)
        return;
    if (trigger == SF_BATCH_TRIGGER_SIZE)
        sf_count(&s->size_trigger, 1);
    else if (trigger == SF_BATCH_TRIGGER_TIMEOUT)
        sf_count(&s->timeout_trigger, 1);
    sf_count(&s->items[bucket_of(batch_size_bounds, SF_BATCH_SIZE_BOUNDS, items)], 1);
    sf_count(&s->items_sum, items);
    sf_count(&s->bytes[bucket_of(batch_bytes_bounds, SF_BATCH_BYTES_BOUNDS, bytes)], 1);
    sf_count(&s->bytes_sum, bytes);
}

void sf_batch_stats_add(sf_batch_stats *dst, sf_batch_stats *src)
{
    sf_count(&dst->size_trigger, sf_counter_get(&src->size_trigger));
    sf_count(&dst->timeout_trigger, sf_counter_get(&src->timeout_trigger));
    for (size_t i = 0; i <= SF_BATCH_SIZE_BOUNDS; i++)
        sf_count(&dst->items[i], sf_counter_get(&src->items[i]));
    sf_count(&dst->items_sum, sf_counter_get(&src->items_sum));
    for (size_t i = 0; i <= SF_BATCH_BYTES_BOUNDS; i++)
        sf_count(&dst->bytes[i], sf_counter_get(&src->bytes[i]));
    sf_count(&dst->bytes_sum, sf_counter_get(&src->bytes_sum));
}

/* ---- an exporter's latest failed sends ------------------------------------ */

static void failure_lock(sf_failure_log *log)
{
    while (atomic_exchange_explicit(&log->busy, true, memory_order_acquire))
        sched_yield();
}

static void failure_unlock(sf_failure_log *log)
{
    atomic_store_explicit(&log->busy, false, memory_order_release);
}

void sf_failure_note(sf_failure_log *log, const char *detail)
{
    int64_t now = sf_now_ms();

    failure_lock(log);
    log->at_ms[log->next] = now > 0 ? now : 1;
    log->next = (log->next + 1) % SF_FAILURE_LOG;
    snprintf(log->detail, sizeof(log->detail), "%s", detail != NULL ? detail : "");
    failure_unlock(log);
}

unsigned sf_failure_count(sf_failure_log *log, int64_t since_ms, char *detail, size_t size)
{
    unsigned n = 0;

    failure_lock(log);
    for (unsigned i = 0; i < SF_FAILURE_LOG; i++)
        if (log->at_ms[i] != 0 && log->at_ms[i] >= since_ms)
            n++;
    if (size > 0)
        snprintf(detail, size, "%s", log->detail);
    failure_unlock(log);
    return n;
}

/* ---- the Prometheus text of every component's counters ---------------------- */

/* The rendered page: bounded (a few KB per component in practice); past
 * the bound, or out of memory, rendering fails whole. */
#define METRICS_TEXT_MAX (16u << 20)

typedef struct sf_text {
    sf_dynbuf buf;
    bool failed;
} sf_text;

static void text_add(sf_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void text_add(sf_text *t, const char *fmt, ...)
{
    va_list ap;

    if (t->failed)
        return;
    va_start(ap, fmt);
    t->failed = sf_dynbuf_vprintf(&t->buf, fmt, ap) != SF_OK;
    va_end(ap);
}

static void help(sf_text *t, const char *name, const char *type, const char *text)
{
    text_add(t, "# HELP %s %s\n# TYPE %s %s\n", name, text, name, type);
}

static const char *const transport_names[SF_TRANSPORT_COUNT] = { "grpc", "http", "" };

typedef uint64_t (*counter_get)(sf_counters *c, int reason);

static uint64_t get_accepted(sf_counters *c, int r) { (void)r; return sf_counter_get(&c->accepted_spans); }
static uint64_t get_refused(sf_counters *c, int r) { return sf_counter_get(&c->refused_spans[r]); }
static uint64_t get_requests(sf_counters *c, int r) { (void)r; return sf_counter_get(&c->requests); }
static uint64_t get_refused_requests(sf_counters *c, int r) { return sf_counter_get(&c->refused_requests[r]); }
static uint64_t get_dropped_fields(sf_counters *c, int m) { return sf_counter_get(&c->dropped_fields[m]); }
static uint64_t get_unexported(sf_counters *c, int i) { return sf_counter_get(&c->unexported[i]); }
static uint64_t get_incoming(sf_counters *c, int r) { (void)r; return sf_counter_get(&c->incoming_items); }
static uint64_t get_outgoing(sf_counters *c, int r) { (void)r; return sf_counter_get(&c->outgoing_items); }
static uint64_t get_dropped(sf_counters *c, int r) { return sf_counter_get(&c->dropped_spans[r]); }
static uint64_t get_removed(sf_counters *c, int r) { (void)r; return sf_counter_get(&c->removed_attributes); }
static uint64_t get_sent(sf_counters *c, int r) { (void)r; return sf_counter_get(&c->sent_spans); }
static uint64_t get_failed(sf_counters *c, int r) { return sf_counter_get(&c->send_failed_spans[r]); }
static uint64_t get_enqfail(sf_counters *c, int r) { (void)r; return sf_counter_get(&c->enqueue_failed_spans); }
static uint64_t get_retries(sf_counters *c, int r) { (void)r; return sf_counter_get(&c->retries); }
static uint64_t get_qsize(sf_counters *c, int r) { (void)r; return (uint64_t)atomic_load(&c->queue_size); }
static uint64_t get_qcap(sf_counters *c, int r) { (void)r; return (uint64_t)atomic_load(&c->queue_capacity); }
static uint64_t get_queued(sf_counters *c, int r) { (void)r; return sf_counters_queued(c); }
static uint64_t get_refused_share(sf_counters *c, int r) { (void)r; return sf_counter_get(&c->refused_share); }
static uint64_t get_qclients(sf_counters *c, int r) { (void)r; return c->share != NULL ? sf_share_clients(c->share) : 0; }
static uint64_t get_qshare(sf_counters *c, int r) { (void)r; return c->share != NULL ? sf_share_fair(c->share) : 0; }

/* Which label a metric has beyond the component's: none, reason, message. */
enum { BY_NONE = 0, BY_REASON = 1, BY_MESSAGE = 2, BY_SIGNAL = 3 };

typedef struct metric_def {
    sf_kind kind;
    /* with `items`, the name's "%s" is the signal's items ("spans",
     * "log_records", "metric_points": sf_signal_items), and the series of
     * each signal are a metric of their own; without, one metric holds
     * every signal's series, those of logs and metrics told apart by a
     * signal label (`extra`'s, or signal="...") */
    const char *name;
    bool items;
    const char *type;
    int by;                     /* BY_* */
    counter_get get;
    const char *help;           /* "%s": the items, with `items` */
    /* a label upstream's series carry whose value is the signal's name
     * (v0.120: processorhelper's otel.signal, the exporter queue's
     * data_type), or NULL */
    const char *extra;
} metric_def;

static const metric_def metric_defs[] = {
    { SF_KIND_RECEIVER, "otelcol_receiver_accepted_%s", true, "counter", false, get_accepted,
      "Items (%s) accepted into the pipeline (filtered and queued for export).", NULL },
    { SF_KIND_RECEIVER, "otelcol_receiver_refused_%s", true, "counter", true, get_refused,
      "Items (%s) refused, by reason; the client was told so.", NULL },
    { SF_KIND_RECEIVER, "spanfence_receiver_dropped_%s", true, "counter", true, get_dropped,
      "Items (%s) received and dropped before any pipeline, by reason (out_of_band: spans of an "
      "engine whose trace level was raised out of band, trace_control's out_of_band: drop); "
      "the client was told they were taken.", NULL },
    { SF_KIND_RECEIVER, "spanfence_receiver_requests", false, "counter", false, get_requests,
      "Export requests received.", NULL },
    { SF_KIND_RECEIVER, "spanfence_receiver_refused_requests", false, "counter", true,
      get_refused_requests,
      "Export requests refused, by reason (also those whose items could not be counted).", NULL },
    { SF_KIND_RECEIVER, "spanfence_receiver_dropped_fields", false, "counter", BY_MESSAGE,
      get_dropped_fields,
      "Fields the OTLP schema does not define (unknown, reserved, obsolete, profiles-only), dropped, by message type.", NULL },
    { SF_KIND_RECEIVER, "spanfence_receiver_unexported_requests", false, "counter", BY_SIGNAL,
      get_unexported,
      "OTLP metrics and logs requests refused (gRPC UNIMPLEMENTED, HTTP 404): no pipeline of the signal lists the receiver.", NULL },
    { SF_KIND_RECEIVER, "spanfence_receiver_refused_share_requests", false, "counter", false,
      get_refused_share,
      "Export requests refused (counted under reason queue_full) because their client held more than its share of a sending queue over half full.", NULL },
    { SF_KIND_PROCESSOR, "otelcol_processor_incoming_items", false, "counter", false, get_incoming,
      "Items that entered the processor.", "otel_signal" },
    { SF_KIND_PROCESSOR, "otelcol_processor_outgoing_items", false, "counter", false, get_outgoing,
      "Items that left the processor.", "otel_signal" },
    { SF_KIND_PROCESSOR, "otelcol_processor_dropped_%s", true, "counter", true, get_dropped,
      "Items (%s) dropped by the processor, by reason (filter_failed: failed closed).", NULL },
    { SF_KIND_PROCESSOR, "spanfence_processor_removed_attributes", false, "counter", false,
      get_removed, "Attributes removed because their key is not allowlisted.", NULL },
    /* The exporters' gauges come before their counters: queued is read
     * before sent and send_failed (sf_counters_queued says why). */
    { SF_KIND_EXPORTER, "otelcol_exporter_queue_size", false, "gauge", false, get_qsize,
      "Batches waiting in the sending queue.", "data_type" },
    { SF_KIND_EXPORTER, "otelcol_exporter_queue_capacity", false, "gauge", false, get_qcap,
      "Capacity of the sending queue, in batches.", "data_type" },
    { SF_KIND_EXPORTER, "spanfence_exporter_queued_%s", true, "gauge", false, get_queued,
      "Items (%s) accepted and not yet sent or failed (waiting, in flight or in backoff).", NULL },
    { SF_KIND_EXPORTER, "otelcol_exporter_sent_%s", true, "counter", false, get_sent,
      "Items (%s) delivered to the destination.", NULL },
    { SF_KIND_EXPORTER, "otelcol_exporter_send_failed_%s", true, "counter", true, get_failed,
      "Items (%s) accepted but given up on, by reason.", NULL },
    { SF_KIND_EXPORTER, "otelcol_exporter_enqueue_failed_%s", true, "counter", false, get_enqfail,
      "Items (%s) refused because the sending queue was full.", NULL },
    { SF_KIND_EXPORTER, "spanfence_exporter_retries", false, "counter", false, get_retries,
      "Send attempts retried.", NULL },
    { SF_KIND_EXPORTER, "spanfence_exporter_queue_clients", false, "gauge", false, get_qclients,
      "Clients sharing the sending queue: holding some of it, or sending in the last 10 s (per connection from loopback, per address otherwise).", "data_type" },
    { SF_KIND_EXPORTER, "spanfence_exporter_queue_share", false, "gauge", false, get_qshare,
      "Room in the sending queue (its units) each client may hold while the queue is over half full: capacity / clients, at least a 64th.", "data_type" },
    { SF_KIND_EXTENSION, "spanfence_extension_injected_spans", false, "counter", false,
      get_accepted,
      "Spans an extension made (trace_control's window markers), taken by the exporters.", NULL },
    { SF_KIND_EXTENSION, "spanfence_extension_refused_spans", false, "counter", true, get_refused,
      "Spans an extension made that the exporters refused, by reason.", NULL },
};

/* The series name as the style has it: `base`, its unit's suffix
 * ("seconds", "bytes", or NULL) unless already there, "_total" for a
 * counter. */
static const char *series_name(const sf_metrics_style *st, const char *base, const char *unit,
                               bool counter, char *buf, size_t size)
{
    size_t bl = strlen(base), ul = unit ? strlen(unit) : 0;
    bool has_unit = unit != NULL && bl > ul && strcmp(base + bl - ul, unit) == 0 &&
                    base[bl - ul - 1] == '_';

    snprintf(buf, size, "%s%s%s%s", base, st->units && unit && !has_unit ? "_" : "",
             st->units && unit && !has_unit ? unit : "", counter && st->type_suffix ? "_total" : "");
    return buf;
}

typedef struct render_ctx {
    sf_text t;
    const sf_metrics_style *style;
    char konst[512];            /* the resource labels every series carries, "" or "a=\"b\"," */
    char alone[520];            /* the same for a series with no other label: "" or "{a=\"b\"}" */
} render_ctx;

/* Whether message type `m` is part of `signal`'s schema (its request's
 * messages and the common ones it uses), so the series of a signal's
 * dropped fields name its own messages only. */
static bool msg_of_signal(sf_otlp_msg m, sf_signal signal)
{
    switch (m) {
    case SF_OTLP_MSG_RESOURCE:
    case SF_OTLP_MSG_ENTITY_REF:
    case SF_OTLP_MSG_SCOPE:
    case SF_OTLP_MSG_KEY_VALUE:
    case SF_OTLP_MSG_ANY_VALUE:
    case SF_OTLP_MSG_ARRAY_VALUE:
    case SF_OTLP_MSG_KEY_VALUE_LIST:
        return true;
    case SF_OTLP_MSG_REQUEST:
    case SF_OTLP_MSG_RESOURCE_SPANS:
    case SF_OTLP_MSG_SCOPE_SPANS:
    case SF_OTLP_MSG_SPAN:
    case SF_OTLP_MSG_EVENT:
    case SF_OTLP_MSG_LINK:
    case SF_OTLP_MSG_STATUS:
        return signal == SF_SIGNAL_TRACES;
    case SF_OTLP_MSG_LOGS_REQUEST:
    case SF_OTLP_MSG_RESOURCE_LOGS:
    case SF_OTLP_MSG_SCOPE_LOGS:
    case SF_OTLP_MSG_LOG_RECORD:
        return signal == SF_SIGNAL_LOGS;
    default:                    /* the metrics request's own messages */
        return signal == SF_SIGNAL_METRICS;
    }
}

/* One component's series of `m` (its counters `c`, of `signal`). */
static void render_series(render_ctx *rc, const metric_def *m, const char *name,
                          const char *labels, sf_counters *c, sf_signal signal)
{
    sf_text *t = &rc->t;
    char all[1024];

    if (m->extra != NULL)
        snprintf(all, sizeof(all), "%s%s,%s=\"%s\"", rc->konst, labels, m->extra,
                 sf_signal_name(signal));
    else if (!m->items && signal != SF_SIGNAL_TRACES)
        snprintf(all, sizeof(all), "%s%s,signal=\"%s\"", rc->konst, labels,
                 sf_signal_name(signal));
    else
        snprintf(all, sizeof(all), "%s%s", rc->konst, labels);
    if (m->by == BY_NONE) {
        text_add(t, "%s{%s} %llu\n", name, all, (unsigned long long)m->get(c, 0));
        return;
    }
    if (m->by == BY_SIGNAL) {
        static const char *const signals[2] = { "metrics", "logs" };

        for (int i = 0; i < 2; i++)
            text_add(t, "%s{%s,signal=\"%s\"} %llu\n", name, all, signals[i],
                     (unsigned long long)m->get(c, i));
        return;
    }
    if (m->by == BY_MESSAGE) {
        for (int i = 0; i < SF_OTLP_MSG_COUNT; i++)
            if (msg_of_signal((sf_otlp_msg)i, signal))
                text_add(t, "%s{%s,message=\"%s\"} %llu\n", name, all,
                         sf_otlp_msg_label((sf_otlp_msg)i), (unsigned long long)m->get(c, i));
        return;
    }
    for (int r = 0; r < SF_REASON_COUNT; r++)
        text_add(t, "%s{%s,reason=\"%s\"} %llu\n", name, all, sf_reason_label(r),
                 (unsigned long long)m->get(c, r));
}

/* Whether a receiver counts `signal` (a pipeline of it lists the
 * receiver; traces always, as before other signals ran). */
static bool receives(const sf_component *c, sf_signal signal)
{
    return signal == SF_SIGNAL_TRACES || (c->signals & (1u << signal)) != 0;
}

/* Whether some component of `kind` (live or retired) has series of
 * `signal`. */
static bool any_of_signal(sf_kind kind, sf_component *components, size_t n,
                          const sf_metrics_style *st, sf_signal signal)
{
    for (size_t i = 0; i < n + st->n_retired; i++) {
        const sf_component *c = i < n ? &components[i] : &st->retired[i - n];

        if (c->type->kind != kind)
            continue;
        if (kind == SF_KIND_RECEIVER ? receives(c, signal) : c->signal == signal)
            return true;
    }
    return false;
}

/* The series of `m` of every component of its kind: of `only` (a metric
 * per signal), or of every signal (SF_SIGNAL_COUNT). */
static void render_def(render_ctx *rc, const metric_def *m, const char *name,
                       sf_component *components, size_t n, sf_signal only)
{
    const sf_metrics_style *st = rc->style;
    char labels[256];

    for (size_t i = 0; i < n + st->n_retired; i++) {
        sf_component *c = i < n ? &components[i] : &st->retired[i - n];
        const char *mark = c->retired ? ",retired=\"true\"" : "";

        if (c->type->kind != m->kind)
            continue;
        if (m->kind != SF_KIND_RECEIVER) {
            if (only != SF_SIGNAL_COUNT && c->signal != only)
                continue;
            snprintf(labels, sizeof(labels), "%s=\"%s\"%s", sf_kind_name(m->kind), c->id, mark);
            render_series(rc, m, name, labels, &c->counters, c->signal);
            continue;
        }
        for (int sg = 0; sg < SF_SIGNAL_COUNT; sg++) {
            if ((only != SF_SIGNAL_COUNT && sg != (int)only) || !receives(c, (sf_signal)sg) ||
                (m->by == BY_SIGNAL && sg != SF_SIGNAL_TRACES))
                continue;
            for (int tr = 0; tr < SF_TRANSPORT_COUNT; tr++) {
                if (!(c->transports & (1u << tr)))
                    continue;
                snprintf(labels, sizeof(labels), "receiver=\"%s\",transport=\"%s\"%s", c->id,
                         transport_names[tr], mark);
                render_series(rc, m, name, labels, &c->transport[sg][tr], (sf_signal)sg);
            }
        }
    }
}

/* A histogram's series, cumulative as Prometheus has them, `le` printed
 * as Go's 'g' format (100000, 1e+06), as upstream's exporter does. */
static void render_histogram(render_ctx *rc, const char *name, const char *labels,
                             const uint64_t *bounds, size_t n, _Atomic uint64_t *buckets,
                             _Atomic uint64_t *sum)
{
    uint64_t cum = 0;

    for (size_t i = 0; i <= n; i++) {
        char le[32];

        cum += sf_counter_get(&buckets[i]);
        if (i < n)
            snprintf(le, sizeof(le), "%g", (double)bounds[i]);
        else
            snprintf(le, sizeof(le), "+Inf");
        text_add(&rc->t, "%s_bucket{%s%s,le=\"%s\"} %llu\n", name, rc->konst, labels, le,
                 (unsigned long long)cum);
    }
    text_add(&rc->t, "%s_sum{%s%s} %llu\n", name, rc->konst, labels,
             (unsigned long long)sf_counter_get(sum));
    text_add(&rc->t, "%s_count{%s%s} %llu\n", name, rc->konst, labels, (unsigned long long)cum);
}

/* Whether components[i] is the first instance of its configured
 * component (processors and exporters have one per signal). */
static bool first_of_its_id(const sf_component *components, size_t i)
{
    for (size_t j = 0; j < i; j++)
        if (components[j].type == components[i].type &&
            strcmp(components[j].id, components[i].id) == 0)
            return false;
    return true;
}

/* Upstream's batchprocessor series, for every processor whose type asks
 * the sending queues to merge (describe_batching): the core keeps their
 * counts (sf_component.batch), whichever exporters formed the requests. */
static void render_batch(render_ctx *rc, sf_component *components, size_t n)
{
    static const struct {
        const char *base, *type, *unit, *help;
        bool detailed;          /* upstream serves it at level detailed only */
    } defs[] = {
        { "otelcol_processor_batch_batch_send_size", "histogram", NULL,
          "Number of units in the batch", false },
        { "otelcol_processor_batch_batch_send_size_bytes", "histogram", "bytes",
          "Number of bytes in batch that was sent. Only available on detailed level.", true },
        { "otelcol_processor_batch_batch_size_trigger_send", "counter", NULL,
          "Number of times the batch was sent due to a size trigger", false },
        { "otelcol_processor_batch_metadata_cardinality", "gauge", NULL,
          "Number of distinct metadata value combinations being processed", false },
        { "otelcol_processor_batch_timeout_trigger_send", "counter", NULL,
          "Number of times the batch was sent due to a timeout trigger", false },
    };
    bool any = false;
    char name[160], labels[256];

    for (size_t i = 0; i < n && !any; i++)
        any = components[i].type->kind == SF_KIND_PROCESSOR &&
              components[i].type->describe_batching != NULL;
    if (!any)
        return;
    for (size_t d = 0; d < sizeof(defs) / sizeof(defs[0]); d++) {
        if (defs[d].detailed && !rc->style->detailed)
            continue;
        series_name(rc->style, defs[d].base, defs[d].unit, strcmp(defs[d].type, "counter") == 0,
                    name, sizeof(name));
        help(&rc->t, name, defs[d].type, defs[d].help);
        for (size_t i = 0; i < n; i++) {
            sf_component *c = &components[i];
            sf_batch_stats sum, *b = &sum;

            if (c->type->kind != SF_KIND_PROCESSOR || c->type->describe_batching == NULL ||
                !first_of_its_id(components, i))
                continue;
            /* one series per processor, its instances' (one per signal)
             * summed, as upstream's instances add into one series */
            memset(&sum, 0, sizeof(sum));
            for (size_t j = i; j < n; j++)
                if (components[j].type == c->type && strcmp(components[j].id, c->id) == 0)
                    sf_batch_stats_add(&sum, &components[j].batch);
            snprintf(labels, sizeof(labels), "processor=\"%s\"", c->id);
            switch (d) {
            case 0:
                render_histogram(rc, name, labels, batch_size_bounds, SF_BATCH_SIZE_BOUNDS,
                                 b->items, &b->items_sum);
                break;
            case 1:
                render_histogram(rc, name, labels, batch_bytes_bounds, SF_BATCH_BYTES_BOUNDS,
                                 b->bytes, &b->bytes_sum);
                break;
            case 2:
                text_add(&rc->t, "%s{%s%s} %llu\n", name, rc->konst, labels,
                         (unsigned long long)sf_counter_get(&b->size_trigger));
                break;
            case 3:             /* no metadata_keys: one batcher, as upstream's single shard */
                text_add(&rc->t, "%s{%s%s} 1\n", name, rc->konst, labels);
                break;
            default:
                text_add(&rc->t, "%s{%s%s} %llu\n", name, rc->konst, labels,
                         (unsigned long long)sf_counter_get(&b->timeout_trigger));
                break;
            }
        }
    }
}

/* service.instance.id when the config sets none: a UUID (v4) made once per
 * process, so it stays the same across reloads, as upstream's. */
static pthread_once_t instance_once = PTHREAD_ONCE_INIT;
static char instance_id[40];

static void make_instance_id(void)
{
    unsigned char b[16] = { 0 };
    FILE *f = fopen("/dev/urandom", "rb");

    if (f != NULL) {
        if (fread(b, 1, sizeof(b), f) != sizeof(b))
            memset(b, 0, sizeof(b));
        fclose(f);
    }
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    snprintf(instance_id, sizeof(instance_id),
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
             b[13], b[14], b[15]);
}

/* The process, read now: uptime and CPU seconds, RSS in bytes. */
static void process_figures(double *uptime, double *cpu, uint64_t *rss)
{
    struct rusage ru;
    unsigned long long start_ticks = 0, resident = 0;
    double boot_up = 0;
    char buf[1024];
    FILE *f;

    *uptime = *cpu = 0;
    *rss = 0;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        *cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
               (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
    if ((f = fopen("/proc/self/statm", "r")) != NULL) {
        if (fscanf(f, "%*u %llu", &resident) == 1)
            *rss = (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
        fclose(f);
    }
    /* field 22 of /proc/self/stat: start time in clock ticks after boot
     * (after the command's ")", which may itself hold spaces) */
    if ((f = fopen("/proc/self/stat", "r")) != NULL) {
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        char *p;

        buf[n] = '\0';
        fclose(f);
        p = strrchr(buf, ')');
        if (p != NULL && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u "
                                "%*d %*d %*d %*d %*d %*d %llu", &start_ticks) != 1)
            start_ticks = 0;
    }
    if ((f = fopen("/proc/uptime", "r")) != NULL) {
        if (fscanf(f, "%lf", &boot_up) != 1)
            boot_up = 0;
        fclose(f);
    }
    if (boot_up > 0 && start_ticks > 0) {
        *uptime = boot_up - (double)start_ticks / (double)sysconf(_SC_CLK_TCK);
        if (*uptime < 0)
            *uptime = 0;
    }
}

static void render_process(render_ctx *rc)
{
    const sf_metrics_style *st = rc->style;
    char name[128];
    double uptime, cpu;
    uint64_t rss;

    process_figures(&uptime, &cpu, &rss);
    series_name(st, "otelcol_process_uptime", "seconds", true, name, sizeof(name));
    help(&rc->t, name, "counter", "Uptime of the process");
    text_add(&rc->t, "%s%s %.3f\n", name, rc->alone, uptime);
    series_name(st, "otelcol_process_cpu_seconds", "seconds", true, name, sizeof(name));
    help(&rc->t, name, "counter", "Total CPU user and system time in seconds");
    text_add(&rc->t, "%s%s %.3f\n", name, rc->alone, cpu);
    series_name(st, "otelcol_process_memory_rss", "bytes", false, name, sizeof(name));
    help(&rc->t, name, "gauge", "Total physical memory (resident set size)");
    text_add(&rc->t, "%s%s %llu\n", name, rc->alone, (unsigned long long)rss);
    series_name(st, "otelcol_process_runtime_heap_alloc_bytes", "bytes", false, name, sizeof(name));
    help(&rc->t, name, "gauge", "Bytes allocated through spanfence's counted allocator "
         "(upstream: Go's heap)");
    text_add(&rc->t, "%s%s %zu\n", name, rc->alone, sf_alloc_in_use());
}

/* Whether components[i] is the first of its type in the list. */
static bool first_of_its_type(const sf_component *components, size_t i)
{
    for (size_t j = 0; j < i; j++)
        if (components[j].type == components[i].type)
            return false;
    return true;
}

/* Component c's value of its type's row r; with `label`, an instance for
 * logs or metrics says so (signal="..."), as its series would repeat
 * traces' otherwise. */
static void render_row(render_ctx *rc, const char *name, sf_component *c, size_t r, bool label)
{
    bool other = label && c->signal != SF_SIGNAL_TRACES;

    text_add(&rc->t, "%s{%s%s=\"%s\"%s%s%s} %lld\n", name, rc->konst, sf_kind_name(c->type->kind),
             c->id, other ? ",signal=\"" : "", other ? sf_signal_name(c->signal) : "",
             other ? "\"" : "", (long long)(int64_t)atomic_load(&c->counters.values[r]));
}

void sf_metrics_put(char *buf, size_t size, size_t *len, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(*len < size ? buf + *len : NULL, *len < size ? size - *len : 0, fmt, ap);
    va_end(ap);
    if (n > 0)
        *len += (size_t)n;
}

/* Type c's metrics into `room` bytes at `tail`, which hold "" when it is
 * called (its contract). */
static size_t type_series(sf_component *c, void *tail, size_t room)
{
    ((char *)tail)[0] = '\0';
    return c->type->metrics(c, tail, room);
}

/* Component c's own series (its type's metrics callback), appended; none
 * for an instance without a context. */
static void render_type_series(sf_text *t, sf_component *c)
{
    void *tail;
    size_t room, need;

    if (c->ctx == NULL)
        return;
    if (sf_dynbuf_room(&t->buf, 1024, &tail, &room) != SF_OK) {
        t->failed = true;
        return;
    }
    need = type_series(c, tail, room);
    if (need >= room && (sf_dynbuf_room(&t->buf, need + 1, &tail, &room) != SF_OK ||
                         (need = type_series(c, tail, room)) >= room)) {
        t->failed = true;
        return;
    }
    sf_dynbuf_commit(&t->buf, need);
}

sf_status sf_metrics_render(sf_component *components, size_t n, char **out, size_t *out_len)
{
    return sf_metrics_render_style(components, n, NULL, out, out_len);
}

sf_status sf_metrics_render_style(sf_component *components, size_t n,
                                  const sf_metrics_style *style, char **out, size_t *out_len)
{
    static const sf_metrics_style plain = { .type_suffix = false };
    render_ctx rc = { .t = { .failed = false }, .style = style ? style : &plain };
    sf_text *t = &rc.t;
    const sf_metrics_style *st = rc.style;
    const char *svc_name = st->service_name ? st->service_name : "spanfence";
    const char *svc_version = st->service_version ? st->service_version : SF_VERSION;
    const char *svc_id;
    char name[160], target[512];
    size_t kl = 0;

    pthread_once(&instance_once, make_instance_id);
    svc_id = st->service_instance_id ? st->service_instance_id : instance_id;
    /* in the order upstream's exporter sorts them */
    rc.konst[0] = '\0';
    if (st->labels & SF_RESOURCE_SERVICE_INSTANCE_ID)
        kl += (size_t)snprintf(rc.konst + kl, sizeof(rc.konst) - kl, "service_instance_id=\"%s\",",
                               svc_id);
    if ((st->labels & SF_RESOURCE_SERVICE_NAME) && kl < sizeof(rc.konst))
        kl += (size_t)snprintf(rc.konst + kl, sizeof(rc.konst) - kl, "service_name=\"%s\",",
                               svc_name);
    if ((st->labels & SF_RESOURCE_SERVICE_VERSION) && kl < sizeof(rc.konst))
        kl += (size_t)snprintf(rc.konst + kl, sizeof(rc.konst) - kl, "service_version=\"%s\",",
                               svc_version);
    snprintf(target, sizeof(target), "service_instance_id=\"%s\",service_name=\"%s\","
             "service_version=\"%s\"", svc_id, svc_name, svc_version);

    sf_dynbuf_init(&t->buf, METRICS_TEXT_MAX);
    for (size_t d = 0; d < sizeof(metric_defs) / sizeof(metric_defs[0]); d++) {
        const metric_def *m = &metric_defs[d];

        if (!m->items) {
            series_name(st, m->name, NULL, strcmp(m->type, "counter") == 0, name, sizeof(name));
            help(t, name, m->type, m->help);
            render_def(&rc, m, name, components, n, SF_SIGNAL_COUNT);
            continue;
        }
        /* a metric per signal: traces' always (as before logs and
         * metrics ran), the others' when some component has them */
        for (int sg = 0; sg < SF_SIGNAL_COUNT; sg++) {
            char base[160], text[256];

            if (sg != SF_SIGNAL_TRACES && !any_of_signal(m->kind, components, n, st, (sf_signal)sg))
                continue;
            snprintf(base, sizeof(base), m->name, sf_signal_items((sf_signal)sg));
            snprintf(text, sizeof(text), m->help, sf_signal_items((sf_signal)sg));
            series_name(st, base, NULL, strcmp(m->type, "counter") == 0, name, sizeof(name));
            help(t, name, m->type, text);
            render_def(&rc, m, name, components, n, (sf_signal)sg);
        }
    }
    render_batch(&rc, components, n);
    /* each type's own rows, once per type, in the order the types first
     * appear; a row named with "%s" is a metric per signal (its items) */
    for (size_t i = 0; i < n; i++) {
        const sf_component_type *type = components[i].type;
        bool seen = !first_of_its_type(components, i);

        for (size_t r = 0; !seen && type->metric_rows != NULL && type->metric_rows[r].name != NULL; r++) {
            const sf_metric_row *m = &type->metric_rows[r];
            bool items = strstr(m->name, "%s") != NULL;

            for (int sg = 0; sg < (items ? SF_SIGNAL_COUNT : 1); sg++) {
                char base[160];
                bool any = false;

                for (size_t j = i; j < n && items; j++)
                    any = any || (components[j].type == type && (int)components[j].signal == sg);
                if (items && !any)
                    continue;
                snprintf(base, sizeof(base), items ? m->name : "%s",
                         items ? sf_signal_items((sf_signal)sg) : m->name);
                series_name(st, base, NULL, !m->gauge, name, sizeof(name));
                help(t, name, m->gauge ? "gauge" : "counter", m->help);
                for (size_t j = i; j < n; j++)
                    if (components[j].type == type && (!items || (int)components[j].signal == sg))
                        render_row(&rc, name, &components[j], r, !items);
            }
        }
    }
    /* series whose labels the type chooses (its metrics callback), one
     * type at a time in the order the types first appear, so a metric's
     * series stay together under one # HELP (metrics_help) */
    for (size_t i = 0; i < n && !t->failed; i++) {
        const sf_component_type *type = components[i].type;

        if (type->metrics == NULL || !first_of_its_type(components, i))
            continue;
        if (type->metrics_help != NULL)
            text_add(t, "%s", type->metrics_help);
        /* once per configured component: its instances for other
         * signals would write the same series again */
        for (size_t j = i; j < n && !t->failed; j++)
            if (components[j].type == type && first_of_its_id(components, j))
                render_type_series(t, &components[j]);
    }
    kl = strlen(rc.konst);
    if (kl > 0)
        snprintf(rc.alone, sizeof(rc.alone), "{%.*s}", (int)kl - 1, rc.konst);
    help(t, "spanfence_memory_allocated_bytes", "gauge",
         "Bytes allocated through spanfence's counted allocator.");
    text_add(t, "spanfence_memory_allocated_bytes%s %zu\n", rc.alone, sf_alloc_in_use());
    render_process(&rc);
    help(t, "target_info", "gauge", "Target metadata");
    text_add(t, "target_info{%s} 1\n", target);
    if (t->failed) {
        sf_dynbuf_release(&t->buf);
        return SF_ENOMEM;
    }
    *out = sf_dynbuf_take(&t->buf, out_len);
    return *out != NULL ? SF_OK : SF_ENOMEM;
}

/* sf_component.h: everything a receiver, processor or exporter sees of the
 * core. A component kind is one const sf_component_type (name, config map,
 * lifecycle functions) defined at the end of its file; an instance is an
 * opaque sf_component pointing at its type and holding its own context.
 *
 * Lifecycle, all called from the main thread:
 *   create   allocate the instance context from the decoded config; no
 *            threads, no sockets (`spanfence validate` runs up to here)
 *   start    bind, connect, spawn threads
 *   shutdown receivers stop accepting; exporters drain their queue for a
 *            bounded time, then count what is left as dropped
 *   destroy  free everything
 * Processors and exporters see a batch as bytes: exporters take its
 * canonical bytes with sf_request_encode(). consume is called from receiver
 * threads, concurrently: component context is read-only after start except
 * for what the component locks itself. */
#ifndef SF_COMPONENT_H
#define SF_COMPONENT_H

#include <stdbool.h>
#include <stddef.h>

#include "sf_alloc.h"
#include "sf_arena.h"
#include "sf_request.h"
#include "sf_config.h"
#include "sf_describe.h"
#include "sf_log.h"
#include "sf_metrics.h"
#include "sf_status.h"

typedef enum sf_kind {
    SF_KIND_RECEIVER,
    SF_KIND_PROCESSOR,
    SF_KIND_EXPORTER,
    SF_KIND_EXTENSION
} sf_kind;

typedef struct sf_component sf_component;

#define SF_SIGNALS_TRACES (1u << SF_SIGNAL_TRACES)
#define SF_SIGNALS_LOGS (1u << SF_SIGNAL_LOGS)
#define SF_SIGNALS_METRICS (1u << SF_SIGNAL_METRICS)
#define SF_SIGNALS_ALL (SF_SIGNALS_TRACES | SF_SIGNALS_LOGS | SF_SIGNALS_METRICS)
struct sf_batching;                     /* sf_sender.h */

typedef struct sf_component_type {
    const char *name;                   /* YAML type name: "otlphttp" */
    const char *alias;                  /* older name also accepted, or NULL */
    sf_kind kind;
    const char *description;            /* one line for --help-config */
    /* The signals a pipeline may use the type for (SF_SIGNALS_* bits);
     * 0: traces only. A pipeline of another signal listing it is refused
     * at validate. Processors and exporters get one instance per signal
     * (their own counters and, for exporters, their own sending queue: a
     * burst of one signal cannot drop another's); receivers and
     * extensions one instance. The instance's signal: sf_component_signal. */
    unsigned signals;
    size_t config_size;                 /* sizeof the config struct */
    const sf_config_row *config_map;    /* SF_CFG_END-terminated */
    /* Optional: cross-field checks after the map filled `config`. */
    sf_status (*check)(sf_cfg_ctx *ctx, void *config);
    sf_status (*create)(sf_component *self, const void *config);
    sf_status (*start)(sf_component *self);
    /* Processors: edit the batch in place (SF_OK) or fail it (it is then
     * dropped whole: fail closed). Exporters: take the batch's encoded bytes
     * (sf_request_encode) into their queue, without blocking; SF_FULL when
     * the queue is full. NULL for receivers, and for processors whose
     * edit the core accounts for (edit_failure below). */
    sf_status (*consume)(sf_component *self, sf_request *batch);
    /* Processors, optional: the rewrite this processor makes, as a codec
     * edit (sf_otlp_wire.h), read-only after create. The core runs every
     * edit: the first of a pipeline in the one pass that validates and
     * canonicalises the request, before the pipeline's processors run, each
     * later one in a pass of its own just before its processor's consume;
     * it records the outcome in the batch (edited_by = the processor,
     * edit_status), which consume then accounts for. A processor never runs
     * its edit itself. The edit is the one for the batch's signal; NULL
     * when the processor changes nothing of that signal (no pass is run
     * for it, and consume lets the batch through). */
    const sf_otlp_edit *(*edit)(const sf_component *self, sf_signal signal);
    /* Processors with an edit may leave consume NULL: the core then
     * accounts for the batch itself (incoming items, the edit's outcome,
     * items the pass took out counted as dropped, removed attributes,
     * outgoing items) and, after a successful edit, calls `edited` (when
     * not NULL) to count what only the type knows into its metric_rows,
     * from batch->stats. A batch whose edit failed is dropped whole with
     * the line "processor ID: dropped a batch of N ITEMS <edit_failure>
     * (STATUS)". A batch of a signal the edit leaves alone passes. */
    const char *edit_failure;
    void (*edited)(sf_component *self, const sf_request *batch);
    void (*shutdown)(sf_component *self);
    void (*destroy)(sf_component *self);
    /* Optional, for state that must outlive a config reload (SIGHUP), such
     * as trace_control's open windows and its socket, or the journald
     * receiver's cursor. suspend: stop like
     * shutdown but keep that state, moved out into the returned parcel
     * (NULL: nothing to keep); the instance is then only destroyed.
     * resume: called before start on the instance of the same type and id
     * in the new service, with the parcel, which it takes over and frees;
     * with self NULL (no such instance) it must finish what the parcel
     * holds (as shutdown would have) and free it. */
    void *(*suspend)(sf_component *self);
    void (*resume)(sf_component *self, void *parcel);

    /* ---- optional: what the core asks of the type (sf_describe.h) ---- */
    /* Exporters: where they send and how they queue; true when filled. */
    bool (*describe_export)(const void *config, sf_export_desc *out);
    /* Receivers: up to `max` endpoints they bind; how many were written. */
    size_t (*describe_listen)(const void *config, sf_listen_desc *out, size_t max);
    /* Processors: their attribute rules; true when they have any to say. */
    bool (*describe_allowlist)(const void *config, sf_allowlist_desc *out);
    /* Processors: the merging they ask of the sending queues of the
     * exporters their pipeline feeds (sf_component_batching); true when
     * filled. */
    bool (*describe_batching)(const void *config, struct sf_batching *out);
    /* Extensions with trace-level windows: their safeguards; true when
     * filled. */
    bool (*describe_windows)(const void *config, sf_windows_desc *out);
    /* The type's own series, one value per instance, in
     * sf_component_counters(self)->values[row]; at most SF_TYPE_METRICS_MAX
     * rows, ended by a row with name NULL. NULL: none. */
    const sf_metric_row *metric_rows;
    /* Optional: series whose labels the type chooses (per target, ...),
     * as Prometheus text lines (# HELP/# TYPE included) written into buf
     * like snprintf (sf_metrics_put): returns the length the whole text
     * needs (the core calls again with a larger buffer when it did not
     * fit). Called on the metrics thread, only for an instance with a
     * context (sf_component_ctx), with buf holding "" when size > 0. */
    size_t (*metrics)(sf_component *self, char *buf, size_t size);
    /* Optional, with `metrics`: the # HELP / # TYPE lines of the series
     * it writes, which the core writes once before the series of every
     * component of the type (written one type at a time), so that two
     * components of a type do not repeat them. NULL: `metrics` writes its
     * own. */
    const char *metrics_help;
    /* Optional: the type's part of `spanfence status` (GET /status on the
     * metrics endpoint, sf_overview.c): a json-c object the core puts
     * under the component, or NULL. Called on the metrics thread. Never a
     * secret (the endpoint is the metrics'). */
    struct json_object *(*status)(sf_component *self);
    /* Optional, receivers: true while the component cannot serve (a
     * listener that cannot accept), saying why in `why`; health_check then
     * answers 503. Called on the health_check thread. */
    bool (*unhealthy)(sf_component *self, char *why, size_t size);
    /* Subcommands of `spanfence`, ended by a verb with name NULL. */
    const sf_cli_verb *verbs;
} sf_component_type;

const char *sf_component_id(const sf_component *c);
/* The signal a processor or exporter instance runs for (its pipelines');
 * SF_SIGNAL_TRACES for receivers, extensions, and instances made by hand. */
sf_signal sf_component_signal(const sf_component *c);
/* Whether pipelines of `signal` may list `type` (type->signals). */
bool sf_component_type_handles(const struct sf_component_type *type, sf_signal signal);
/* The signals `type` handles, in words ("traces", "traces and logs"). */
const char *sf_component_type_signals(const struct sf_component_type *type);
const sf_component_type *sf_component_type_of(const sf_component *c);
void *sf_component_ctx(const sf_component *c);
void sf_component_set_ctx(sf_component *c, void *ctx);
sf_counters *sf_component_counters(sf_component *c);
/* At start: true when this instance replaces one of the same type and id
 * that ran under the previous config (a SIGHUP reload), so it must carry on
 * rather than start afresh (the file exporter does not truncate). */
bool sf_component_is_successor(const sf_component *c);

/* The transports a receiver serves; receiver counters are kept per transport
 * (the `transport` label of otelcol_receiver_* metrics). NONE: a receiver
 * that reads rather than serves (journald), labelled transport="" as
 * upstream's stanza-based receivers are. */
typedef enum sf_transport {
    SF_TRANSPORT_GRPC,
    SF_TRANSPORT_HTTP,
    SF_TRANSPORT_NONE,
    SF_TRANSPORT_COUNT
} sf_transport;

/* Receivers, at create: which transports to report metrics for (bit mask of
 * 1u << sf_transport). */
void sf_component_set_transports(sf_component *receiver, unsigned mask);

/* Receivers: run `batch` through every pipeline of its signal
 * (batch->signal) this receiver feeds (processors in order, then
 * exporters). Synchronous and non-blocking: when it returns SF_OK the items
 * are filtered and queued for export; otherwise nothing of the batch was
 * queued and the status says whether the client may retry
 * (sf_status_retryable). Counts accepted/refused items on the receiver,
 * under the signal. SF_PERMANENT, counted as refused, when no pipeline of
 * the signal lists the receiver (check sf_component_receives first). The
 * caller still owns `batch` and its arena afterwards. */
sf_status sf_component_emit(sf_component *receiver, sf_transport transport, sf_request *batch);

/* Receivers: count the items (spans, log records, metric points) of a
 * request of `signal` refused before it could be emitted (malformed, too
 * large, memory limit) with a reason. */
void sf_component_refuse(sf_component *receiver, sf_transport transport, sf_signal signal,
                         size_t items, sf_reason reason);

/* Where the service an extension belongs to is in its life (the
 * health_check extension answers 200 only in RUNNING): STARTING from
 * create until every component has started, RUNNING until a shutdown or a
 * reload (SIGHUP) begins, then STOPPING. Thread-safe. */
typedef enum sf_service_state {
    SF_SERVICE_STARTING,
    SF_SERVICE_RUNNING,
    SF_SERVICE_STOPPING
} sf_service_state;

/* The state of the service `self` is part of (STOPPING when none). */
sf_service_state sf_component_service_state(const sf_component *self);
/* When that service became RUNNING (its readiness: every component
 * started), as sf_wall_ms() and sf_now_ms() read then; false, nothing
 * written, when it is not RUNNING. Thread-safe. */
bool sf_component_service_running_since(const sf_component *self, int64_t *wall_ms,
                                        int64_t *mono_ms);

/* Extensions (health_check's check_collector_pipeline): the first
 * exporter of `self`'s service, in config order, with at least `threshold`
 * failed sends (every failed attempt, retried or not) in the last
 * `interval_ms`. True with "exporter 'ID': N failed sends in the last
 * ...; the last: DETAIL" in `why`. Thread-safe. */
bool sf_component_failing_exporter(const sf_component *self, unsigned threshold,
                                   int64_t interval_ms, char *why, size_t size);

/* Extensions (health_check): the first receiver of `self`'s service whose
 * type's `unhealthy` says it cannot serve; true with "receiver 'ID': WHY"
 * in `why`. Thread-safe. */
bool sf_component_unhealthy_receiver(const sf_component *self, char *why, size_t size);

/* The collector-wide totals of every receiver, processor and exporter
 * right now, of the signal of `self` (sf_component_signal: traces for
 * extensions) (all zero when `self` is not part of a service). */
void sf_component_totals(sf_component *self, sf_totals *out);

/* A span tap: told of every batch a receiver emitted, once its pipelines ran
 * and just before the receiver counts it, with the request as received
 * (`raw`, valid only during the call), its span count, and whether it was
 * accepted (SF_OK) or refused. Called on
 * receiver threads, concurrently: it must not block, and should return at
 * once when it has nothing to do (it runs on every batch). */
typedef void (*sf_span_tap_fn)(void *ctx, const uint8_t *raw, size_t len, size_t spans,
                               bool accepted);

/* Extensions, at create (before the service starts; read-only after): make
 * `fn(ctx, ...)` the service's one span tap (NULL removes it). `ctx` must
 * outlive the service's receivers. A second tap replaces the first, with a
 * warning. No effect when `ext` is not part of a service. */
void sf_component_set_span_tap(sf_component *ext, sf_span_tap_fn fn, void *ctx);

/* A span gate: lets an extension keep a resource's spans out of the
 * pipelines. Before a receiver runs a traces request through its
 * pipelines, when `armed(ctx)` (cheap: an atomic load; NULL: always) says
 * the gate may drop something now, `keeps(ctx, rs, len, &reason)` is asked
 * of each ResourceSpans of the request (`rs`: the entry as on the wire, a
 * request of its own, valid only during the call). The spans of an entry
 * it refuses (false, with `reason` set) go nowhere: they are neither
 * accepted nor refused but counted on the receiver as dropped with that
 * reason (spanfence_receiver_dropped_spans{reason}), and the client is
 * told they were taken. The span tap still sees the request as received
 * (its span count includes the dropped ones). When an armed gate finds no
 * memory to take the resources out, the request is refused (memory_limit,
 * retryable): what the gate may drop never passes it unasked.
 * Called on receiver threads, concurrently: it must not block. */
typedef struct sf_span_gate {
    bool (*armed)(void *ctx);
    bool (*keeps)(void *ctx, const uint8_t *rs, size_t len, sf_reason *reason);
    void *ctx;              /* must outlive the service's receivers */
} sf_span_gate;

/* Extensions, at create (before the service starts; read-only after): make
 * `gate` (copied; NULL removes it) the service's one span gate; as
 * sf_component_set_span_tap. */
void sf_component_set_span_gate(sf_component *ext, const sf_span_gate *gate);

/* A log tap: told of every logs request a receiver emitted, once its
 * pipelines ran and just before the receiver counts it, with the request as the receiver made it (`raw`, an
 * ExportLogsServiceRequest, valid only during the call: the bytes before
 * any processor, so bodies a fence removes are still in it), the id of the
 * receiver, and whether it was accepted (SF_OK) or refused. Called on
 * receiver threads, concurrently: it must not block, and should return at
 * once when it has nothing to do (it runs on every logs request). */
typedef void (*sf_log_tap_fn)(void *ctx, const char *receiver, const uint8_t *raw, size_t len,
                              bool accepted);

/* Extensions, at create (before the service starts; read-only after): make
 * `fn(ctx, ...)` the service's one log tap (NULL removes it); as
 * sf_component_set_span_tap. */
void sf_component_set_log_tap(sf_component *ext, sf_log_tap_fn fn, void *ctx);

/* A metrics tap: told of every metrics request a receiver emitted (a
 * scrape of the prometheus receiver is one), once its pipelines ran and
 * just before the receiver counts it, as sf_log_tap_fn: `raw` is the
 * ExportMetricsServiceRequest as the receiver made it (before any
 * processor), valid only during the call. Receiver threads, concurrently:
 * it must not block, and should return at once when it has nothing to do. */
typedef void (*sf_metrics_tap_fn)(void *ctx, const char *receiver, const uint8_t *raw,
                                  size_t len, bool accepted);

/* Extensions, at create: make `fn(ctx, ...)` the service's one metrics tap
 * (NULL removes it); as sf_component_set_span_tap. */
void sf_component_set_metrics_tap(sf_component *ext, sf_metrics_tap_fn fn, void *ctx);

/* Extensions: hand one ExportTraceServiceRequest (`otlp`, copied) to the
 * traces pipeline `pipeline` (NULL: every traces pipeline) AFTER its
 * processors: the codec writes its canonical form, unedited, and the
 * pipeline's exporters take it like any batch. The spans are counted on
 * `self` as accepted (SF_OK) or refused with the exporters' status, so the
 * collector-wide totals still balance. SF_STOPPED while the exporters are
 * not running (before they start, once they stop); SF_INVALID for bytes
 * the codec refuses, or no such traces pipeline. */
sf_status sf_component_inject(sf_component *self, const char *pipeline, const uint8_t *otlp,
                              size_t len);

/* Whether the service of `c` (its config) has a traces pipeline `id`. */
bool sf_component_has_traces_pipeline(const sf_component *c, const char *id);
/* Whether the service of `c` has a receiver `id` that a pipeline of
 * `signal` lists (its requests of that signal are then emitted). */
bool sf_component_has_receiver(const sf_component *c, const char *id, sf_signal signal);

/* Exporters, at start: the batching asked by a processor (its type's
 * describe_batching, the `batch` processor's) in a traces pipeline that
 * exports to `exporter` (the first such pipeline and processor), for
 * sf_sender_set_batching (sf_sender.h). True when there is one; false (and
 * *out untouched) when not, or outside a service. */
bool sf_component_batching(const sf_component *exporter, struct sf_batching *out);

/* Receivers: whether a pipeline of `signal` lists this receiver: it then
 * serves that signal's requests (sf_component_emit); else it refuses them
 * as upstream's receiver does (gRPC UNIMPLEMENTED, HTTP 404), counted with
 * sf_component_unexported. */
bool sf_component_receives(const sf_component *receiver, sf_signal signal);
/* Receivers: one request of `signal` (metrics or logs) refused because no
 * pipeline of the signal lists the receiver
 * (spanfence_receiver_unexported_requests{signal}). */
void sf_component_unexported(sf_component *receiver, sf_transport transport, sf_signal signal);

/* Receivers: false while the memory limiter asks to refuse new data. */
bool sf_component_may_accept(const sf_component *receiver);

/* The memory budget is the service's: a memory limiter declares the limits
 * it enforces (bytes of counted memory, 0 = none) when it starts and 0, 0
 * when it shuts down, and says whether the RSS it samples is over them
 * (from its own thread). The service applies the tightest limits any of
 * its components declares, and pressure while any reports it, to the
 * counted allocator (sf_alloc.h), so two limiters cannot undo each other.
 * Outside a service (a component made by hand in a test) the values go to
 * the allocator as they are. Thread-safe. */
void sf_component_set_memory_limits(sf_component *self, size_t soft, size_t hard);
void sf_component_set_memory_pressure(sf_component *self, bool on);

#endif

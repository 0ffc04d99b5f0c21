/* sf_request.h: what flows through a pipeline: one OTLP export request
 * (traces, logs or metrics: sf_signal.h) as bytes. Processors never edit a tree: the transform's edit is applied by
 * the codec (sf_otlp_wire.h) in the pass that validates the request;
 * exporters take the canonical bytes (an sf_buf, reference-counted for
 * fan-out) into their queues, never a decoded tree (~10x larger). */
#ifndef SF_REQUEST_H
#define SF_REQUEST_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sf_arena.h"
#include "sf_buf.h"
#include "sf_otlp_wire.h"
#include "sf_signal.h"
#include "sf_status.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"

typedef Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest sf_otlp_request;
typedef Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceResponse sf_otlp_response;
typedef Opentelemetry__Proto__Trace__V1__ResourceSpans sf_otlp_resource_spans;
typedef Opentelemetry__Proto__Trace__V1__ScopeSpans sf_otlp_scope_spans;
typedef Opentelemetry__Proto__Trace__V1__Span sf_otlp_span;
typedef Opentelemetry__Proto__Trace__V1__Span__Event sf_otlp_event;
typedef Opentelemetry__Proto__Trace__V1__Span__Link sf_otlp_link;
typedef Opentelemetry__Proto__Trace__V1__Status sf_otlp_status;
typedef Opentelemetry__Proto__Common__V1__KeyValue sf_otlp_kv;
typedef Opentelemetry__Proto__Common__V1__AnyValue sf_otlp_any;
typedef Opentelemetry__Proto__Resource__V1__Resource sf_otlp_resource;
typedef Opentelemetry__Proto__Common__V1__InstrumentationScope sf_otlp_scope;

/* A batch is the request as received (raw, valid during the receiver's
 * call) and, once the codec has run on it (sf_otlp_wire.h), its canonical
 * bytes. The core runs the codec once per pipeline, with the first editing
 * processor's edit, before that pipeline's processors see the batch; that
 * pass is also the request's validation. Exporters take the canonical
 * bytes; readers that want a tree (debug, file JSON) decode those. */
typedef struct sf_request {
    sf_signal signal;           /* what the bytes are; zero: traces */
    sf_arena *arena;            /* for sf_request_tree's tree; the caller's */
    const uint8_t *raw;         /* the request as received */
    size_t raw_len;
    unsigned max_depth;
    size_t spans;               /* items of the signal (spans, log records, metric data
                                 * points: upstream counts metric points); known once
                                 * the codec ran */
    size_t received;            /* items as the receiver got them (the first pass, before a
                                 * `filter` dropped some: stats.filtered_items) */
    sf_buf *wire;               /* canonical bytes, or NULL before the codec ran; owned */
    sf_otlp_stats stats;        /* of the pass that made `wire` */
    const void *edited_by;      /* the component whose edit made `wire` (NULL: none) */
    sf_status edit_status;      /* that pass's status, when the core ran it for edited_by */
    sf_otlp_request *req;       /* `wire` decoded (sf_request_tree, traces), read-only */
    /* Who sent the request, for the sending queues' fair shares
     * (sf_share.h): sf_net_client_key of the peer, set by the receiver
     * after sf_request_init; 0: nobody in particular (the collector's own). */
    uint64_t client;
    /* Set by a sending queue that refused the batch (SF_FULL) because its
     * client was over its share, not because the queue was full. */
    bool over_share;
} sf_request;

/* Default cap on AnyValue nesting (arrays / key-value lists in values). */
#define SF_OTLP_DEFAULT_MAX_DEPTH 32

/* Initialise `b` over `data` (which must stay valid while the batch is in
 * use), a trace request; nothing is read yet. `arena` is the caller's, for
 * any later decode. Always SF_OK. */
sf_status sf_request_init(sf_request *b, sf_arena *arena, const uint8_t *data, size_t len,
                        unsigned max_depth);
/* The same for a request of signal `signal`. Always SF_OK. */
sf_status sf_request_init_signal(sf_request *b, sf_arena *arena, sf_signal signal,
                                 const uint8_t *data, size_t len, unsigned max_depth);

/* Run the codec (for b->signal) on the batch's current bytes with `edit`
 * (NULL: canonical form only) on behalf of `by`: on SF_OK the result is the batch's bytes and
 * b->spans, b->stats describe it (items the edit filtered out are in
 * stats.filtered_items, not in b->spans). On error the batch is unchanged
 * but b->spans holds the spans seen (SF_INVALID: before the error). */
sf_status sf_request_rewrite(sf_request *b, const sf_otlp_edit *edit, const void *by);

/* sf_request_init() then sf_request_tree(): b->req is decoded on SF_OK. */
sf_status sf_request_decode(sf_request *b, sf_arena *arena, const uint8_t *data, size_t len,
                          unsigned max_depth);

/* Decode the batch's canonical bytes (running the codec first if nothing
 * has) into the arena as b->req, for reading. Traces only: SF_UNSUPPORTED
 * for logs and metrics (their readers take the canonical bytes:
 * sf_otlp_json.h). SF_INVALID, SF_ENOMEM. */
sf_status sf_request_tree(sf_request *b);

/* The canonical bytes of the batch (running the codec without an edit if
 * nothing has yet). On SF_OK *out is a new reference the caller must unref. */
sf_status sf_request_encode(sf_request *b, sf_buf **out);

/* Drop the batch's own buffers; the arena stays with its owner. */
void sf_request_release(sf_request *b);

#endif

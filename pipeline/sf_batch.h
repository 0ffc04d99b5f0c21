/* sf_batch.h: what flows through a pipeline. A batch is one decoded
 * ExportTraceServiceRequest whose whole tree lives in an arena the batch's
 * owner controls; processors edit it in place; exporters take the packed,
 * filtered bytes (an sf_buf, reference-counted for fan-out) into their
 * queues, never the decoded tree (~10x larger). */
#ifndef SF_BATCH_H
#define SF_BATCH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sf_arena.h"
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

/* Immutable bytes shared by several owners. */
typedef struct sf_buf {
    _Atomic int refs;
    size_t len;
    size_t spans;               /* spans encoded in data */
    uint8_t data[];
} sf_buf;

/* A buffer of `len` bytes with one reference; NULL on no memory. */
sf_buf *sf_buf_create(size_t len);
sf_buf *sf_buf_ref(sf_buf *b);
void sf_buf_unref(sf_buf *b);       /* frees on the last reference; NULL ok */

typedef struct sf_batch {
    sf_arena *arena;            /* owns req and everything under it */
    sf_otlp_request *req;
    size_t spans;               /* spans in req; processors keep it current */
    sf_buf *encoded;            /* packed form, cached by sf_batch_encode() */
    /* The request bytes it was decoded from, valid while the receiver's call
     * lasts: the core decodes them again when one receiver feeds several
     * pipelines (processors edit in place, so each pipeline needs a copy). */
    const uint8_t *raw;
    size_t raw_len;
    unsigned max_depth;
    bool raw_is_json;           /* raw is OTLP/JSON, not protobuf */
} sf_batch;

/* Default cap on AnyValue nesting (arrays / key-value lists in values). */
#define SF_OTLP_DEFAULT_MAX_DEPTH 32

/* Walk encoded request bytes without allocating: checks the wire structure
 * of every message down to AnyValue, refuses nesting deeper than max_depth
 * (protobuf-c would recurse without limit) and counts spans into *spans.
 * SF_INVALID for malformed bytes or excess depth. */
sf_status sf_otlp_wire_check(const uint8_t *data, size_t len, unsigned max_depth,
                             size_t *spans);

/* Initialise `b` by decoding `data` into `arena` (which the caller keeps
 * alive and owns). Runs sf_otlp_wire_check first. SF_INVALID for bad bytes,
 * SF_ENOMEM when the arena is exhausted. On error *b is zeroed but for
 * b->spans, the spans counted before the error (for the refusal count). */
sf_status sf_batch_decode(sf_batch *b, sf_arena *arena, const uint8_t *data, size_t len,
                          unsigned max_depth);

/* Packed bytes of the batch as it is now. The first call packs and caches;
 * later calls return the cache, so call it only after all processors ran.
 * On SF_OK *out is a new reference the caller must unref. */
sf_status sf_batch_encode(sf_batch *b, sf_buf **out);

/* Drop the cached encoding; the arena stays with its owner. */
void sf_batch_release(sf_batch *b);

/* Number of spans in a decoded request. */
size_t sf_otlp_count_spans(const sf_otlp_request *req);

#endif

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

/* A batch is the request as received (raw, valid during the receiver's
 * call) plus what the processors made of it so far: either new bytes
 * (`wire`, from a processor that edits the encoding directly) or a decoded
 * tree (`req`, for processors that need one). Exporters only ever ask for
 * bytes, so a pipeline whose processors all work on the wire never decodes.
 * The core (sf_service.c) moves a batch between the two forms; processors
 * see `req` decoded and current when their consume() runs. */
typedef struct sf_batch {
    sf_arena *arena;            /* owns req and everything under it */
    const uint8_t *raw;         /* the request as received */
    size_t raw_len;
    unsigned max_depth;
    size_t spans;               /* spans in the batch; processors keep it current */
    sf_buf *wire;               /* current encoding when it is not raw; owned */
    sf_otlp_request *req;       /* decoded tree, or NULL */
    bool req_current;           /* req is the latest state (bytes are stale) */
} sf_batch;

/* Default cap on AnyValue nesting (arrays / key-value lists in values). */
#define SF_OTLP_DEFAULT_MAX_DEPTH 32

/* Walk encoded request bytes without allocating: checks the wire structure
 * of every message down to AnyValue, refuses nesting deeper than max_depth
 * (protobuf-c would recurse without limit) and counts spans into *spans.
 * SF_INVALID for malformed bytes or excess depth. */
sf_status sf_otlp_wire_check(const uint8_t *data, size_t len, unsigned max_depth,
                             size_t *spans);

/* Initialise `b` over `data` (which must stay valid while the batch is in
 * use) after sf_otlp_wire_check; nothing is decoded yet. On SF_INVALID
 * b->spans holds the spans counted before the error (for the refusal
 * count). `arena` is the caller's and is used for any later decode. */
sf_status sf_batch_init(sf_batch *b, sf_arena *arena, const uint8_t *data, size_t len,
                        unsigned max_depth);

/* sf_batch_init() then sf_batch_request(): b->req is decoded on SF_OK. */
sf_status sf_batch_decode(sf_batch *b, sf_arena *arena, const uint8_t *data, size_t len,
                          unsigned max_depth);

/* Make b->req the decoded, current state (decoding the current bytes into
 * the arena if needed). After it the caller may edit b->req in place; the
 * batch's bytes are then considered stale. SF_INVALID if protobuf-c
 * rejects the bytes, SF_ENOMEM when the arena is exhausted. */
sf_status sf_batch_request(sf_batch *b);

/* The current bytes of the batch, for the wire form of processors and for
 * exporters: raw, the last wire result, or b->req packed (cached). On SF_OK
 * *out is a new reference the caller must unref. */
sf_status sf_batch_encode(sf_batch *b, sf_buf **out);

/* The current bytes without taking a reference (valid until the batch
 * changes): for a wire processor's input. */
sf_status sf_batch_bytes(sf_batch *b, const uint8_t **data, size_t *len);

/* Replace the batch's content with `buf` (the batch takes the caller's
 * reference): the result of a wire processor. Any decoded tree is stale. */
void sf_batch_set_wire(sf_batch *b, sf_buf *buf);

/* Drop the batch's own buffers; the arena stays with its owner. */
void sf_batch_release(sf_batch *b);

/* Spans in the encoded request `data` whose resource carries all `n`
 * attributes keys[i] = values[i] (string values, compared bytewise; n == 0
 * matches every resource). Walks the bytes without allocating; meant for
 * bytes that passed sf_otlp_wire_check, but returns 0 for anything
 * malformed rather than trusting that. */
size_t sf_otlp_count_matching_spans(const uint8_t *data, size_t len, size_t n,
                                    const char *const *keys, const char *const *values);

/* Number of spans in a decoded request. */
size_t sf_otlp_count_spans(const sf_otlp_request *req);

#endif

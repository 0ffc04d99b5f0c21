/* sf_otlp_json.h: the OTLP/JSON mapping of the export requests and
 * responses (OTLP/HTTP with Content-Type application/json, and the file
 * exporter's JSON lines), one for every signal (sf_signal.h), read from the
 * generated schema table: for traces between JSON text and protobuf-c
 * structs too; for every signal between JSON text and protobuf bytes
 * (sf_otlp_json_to_wire, sf_otlp_json_from_wire).
 *
 * Mapping (OTLP specification, "JSON Protobuf Encoding"): lowerCamelCase
 * field names (snake_case accepted on input), trace/span ids as hex, other
 * bytes as base64, enums as integers (names accepted on input), 64-bit
 * integers as decimal strings (numbers accepted on input), unknown fields
 * ignored, default-valued fields omitted on output; members written in the
 * .proto files' order for the trace request's messages, in field-number
 * order for the logs' and metrics' (tools/gen_otlp_schema.py, json_order).
 *
 * Refused where Go's protojson or Python's json_format refuse, though
 * json-c (0.16) would take them: a member named twice in one object (at any
 * level, known field or not), a lone UTF-16 surrogate escape in any string,
 * a single-quoted member name, a \u0000 in a member name. Resource's
 * entityRefs is decoded as the schema has it. Known leniency left from
 * json-c: a JSON *number* outside the 64-bit range saturates (strings are
 * range-checked exactly).
 *
 * Ownership: a decoded tree lives in the caller's arena (on error *out is
 * NULL and the arena may hold a partial tree until its next reset); encoded
 * text is NUL-terminated and the caller frees it with sf_free(). */
#ifndef SF_OTLP_JSON_H
#define SF_OTLP_JSON_H

#include <stdbool.h>
#include <stddef.h>

#include <stdint.h>

#include "sf_arena.h"
#include "sf_request.h"
#include "sf_signal.h"
#include "sf_status.h"

/* Decode an OTLP/JSON ExportTraceServiceRequest into protobuf-c structs whose memory all comes
 * from `arena` (sf_arena_alloc; use sf_arena_pb_allocator semantics: nothing to free). Nesting
 * of AnyValue arrays/kvlists deeper than max_depth is refused. SF_INVALID with a short
 * lowercase reason in err (e.g. "resourceSpans[0].scopeSpans[1].spans[3].traceId: not 32 hex
 * digits") for bad input; SF_ENOMEM when the arena is exhausted. */
sf_status sf_otlp_json_decode(sf_arena *arena, const char *json, size_t len, unsigned max_depth,
                              sf_otlp_request **out, char *err, size_t err_size);
/* Encode a request as one line of OTLP/JSON (no newline) into an sf_malloc'd buffer. */
sf_status sf_otlp_json_encode(const sf_otlp_request *req, char **out, size_t *out_len);

/* Encode an ExportTraceServiceResponse (the OTLP/HTTP JSON reply body: "{}" or
 * {"partialSuccess":{...}}) into an sf_malloc'd, NUL-terminated buffer the caller frees
 * with sf_free. SF_ENOMEM on no memory. */
sf_status sf_otlp_json_encode_response(const sf_otlp_response *resp, char **out,
                                       size_t *out_len);

/* An OTLP/JSON export request of signal `s` (the same mapping and
 * refusals as sf_otlp_json_decode) as protobuf bytes in `arena` into
 * *out[0, *out_len): the bytes the codec (sf_otlp_rewrite_signal) then
 * validates and makes canonical. SF_INVALID with a reason in err,
 * SF_TOOBIG, SF_ENOMEM; SF_UNSUPPORTED for a signal out of range
 * (sf_otlp_json_maps). A second member of a oneof is refused ("more than
 * one value set" for traces, "a second member of a oneof" for the others). */
sf_status sf_otlp_json_to_wire(sf_signal s, sf_arena *arena, const char *json, size_t len,
                               unsigned max_depth, const uint8_t **out, size_t *out_len,
                               char *err, size_t err_size);
/* The canonical protobuf bytes of a request of signal `s` (the codec's
 * output) as one line of OTLP/JSON (no newline) in an sf_malloc'd,
 * NUL-terminated buffer the caller frees with sf_free; `arena` holds the
 * decode. SF_INVALID, SF_ENOMEM, SF_UNSUPPORTED as above. */
sf_status sf_otlp_json_from_wire(sf_signal s, sf_arena *arena, const uint8_t *wire, size_t len,
                                 char **out, size_t *out_len);
/* Whether the JSON codec maps signal `s` (every signal in range). */
bool sf_otlp_json_maps(sf_signal s);

/* The OTLP/HTTP JSON reply body for a request of signal `s`: "{}", or
 * {"partialSuccess":{...}} with rejectedSpans / rejectedLogRecords /
 * rejectedDataPoints when `rejected` > 0 and errorMessage when `message` is
 * not NULL or empty. sf_malloc'd, NUL-terminated; SF_ENOMEM. */
sf_status sf_otlp_json_encode_partial(sf_signal s, int64_t rejected, const char *message,
                                      char **out, size_t *out_len);

#endif

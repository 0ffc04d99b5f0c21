/* sf_otlp_json.h: OTLP/JSON <-> protobuf-c trace requests. */
#ifndef SF_OTLP_JSON_H
#define SF_OTLP_JSON_H

#include "sf_arena.h"
#include "sf_batch.h"

/* Decode an OTLP/JSON ExportTraceServiceRequest into arena-owned structs. */
sf_status sf_otlp_json_decode(sf_arena *arena, const char *json, size_t len, unsigned max_depth,
                              sf_otlp_request **out, char *err, size_t err_size);
/* Encode a request as one line of OTLP/JSON (no newline), sf_malloc'd. */
sf_status sf_otlp_json_encode(const sf_otlp_request *req, char **out, size_t *out_len);

#endif

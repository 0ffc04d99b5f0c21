/* receivers/otlp/grpc_call.h: what the gRPC call (receiver_grpc.c) offers
 * the HTTP/2 connection (h2_conn.c): its header and data callbacks, and the
 * answers and refusals of a call. The event layer (h2_server.c) puts them in
 * the h2_up table the connection calls up through; receiver_grpc.c calls
 * them directly. */
#ifndef SF_RECEIVERS_OTLP_GRPC_CALL_H
#define SF_RECEIVERS_OTLP_GRPC_CALL_H

#include "h2_conn.h"

int grpc_on_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name,
                   size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                   void *ud);
int grpc_on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data,
                       size_t len, void *ud);
/* Headers complete: answer at once what will not be served. */
void grpc_stream_headers_done(h2_stream *s);
/* The message is complete: decode, run the pipeline, answer (or park). */
void grpc_stream_finish(h2_stream *s);
/* Answer: OK with its message, or trailers only with the status. */
void grpc_stream_answer(h2_stream *s, int code, const char *why);
/* Refuse for a reason the client caused, counted. */
void grpc_stream_refuse(h2_stream *s, sf_reason reason, int code, const char *why);
/* From now on the message is counted, not kept. */
void grpc_stream_start_refusing(h2_stream *s);

#endif

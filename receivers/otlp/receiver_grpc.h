/* receivers/otlp/receiver_grpc.h: the OTLP/gRPC server of the `otlp` receiver. */
#ifndef SF_RECEIVERS_OTLP_RECEIVER_GRPC_H
#define SF_RECEIVERS_OTLP_RECEIVER_GRPC_H

#include "otlp.h"
#include "otlp_limit.h"

typedef struct sf_receiver_grpc sf_receiver_grpc;

/* Allocate (no threads, no socket). `clients` is the receiver's table
 * (decompression per client), shared with its HTTP server; it outlives the
 * server. */
sf_status sf_receiver_grpc_create(sf_component *self, const sf_receiver_grpc_config *cfg,
                              unsigned max_depth, sf_otlp_clients *clients,
                              sf_receiver_grpc **out);
/* Bind and start the worker threads (nghttp2, one epoll loop each). SF_IO when the port cannot be bound. */
sf_status sf_receiver_grpc_start(sf_receiver_grpc *srv);
/* Stop accepting, let calls in flight finish (a grace period, then cancel),
 * join the threads. Safe if never started. */
void sf_receiver_grpc_shutdown(sf_receiver_grpc *srv);
void sf_receiver_grpc_destroy(sf_receiver_grpc *srv);
/* False while accept() fails for want of fds or memory (retried with
 * backoff), for health reporting. */
bool sf_receiver_grpc_accepting(const sf_receiver_grpc *srv);
/* Partial messages answered UNAVAILABLE and freed because memory was short
 * (spanfence_receiver_reclaimed_*), and the bytes they held. Thread-safe. */
void sf_receiver_grpc_reclaimed(const sf_receiver_grpc *srv, uint64_t *calls, uint64_t *bytes);
/* Connections closed with GOAWAY ENHANCE_YOUR_CALM for crossing a flood
 * limit, for `why` (spanfence_receiver_closed_connections). Thread-safe. */
uint64_t sf_receiver_grpc_closed(const sf_receiver_grpc *srv, sf_otlp_close why);
/* Ask every worker to reclaim the partial messages of clients over their
 * share now (while memory is short or less than the headroom is free): the
 * HTTP server's requests under their share may be the ones waiting. Never
 * blocks. */
void sf_receiver_grpc_reclaim_soon(void *srv);
/* The HTTP server's, called when a complete call waits for memory. */
void sf_receiver_grpc_set_peer(sf_receiver_grpc *srv, sf_otlp_reclaim_fn fn, void *peer);
/* Connections closed to give their place to a newcomer past the caps
 * (spanfence_receiver_evicted_connections). Thread-safe. */
uint64_t sf_receiver_grpc_evicted(const sf_receiver_grpc *srv);

#endif

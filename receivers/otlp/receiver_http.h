/* receivers/otlp/receiver_http.h: the OTLP/HTTP server of the `otlp` receiver. */
#ifndef SF_RECEIVERS_OTLP_RECEIVER_HTTP_H
#define SF_RECEIVERS_OTLP_RECEIVER_HTTP_H

#include "otlp.h"
#include "otlp_limit.h"

typedef struct sf_receiver_http sf_receiver_http;

/* Allocate (no threads, no socket). `clients` as sf_receiver_grpc_create. */
sf_status sf_receiver_http_create(sf_component *self, const sf_receiver_http_config *cfg,
                              unsigned max_depth, sf_otlp_clients *clients,
                              sf_receiver_http **out);
/* Bind and start serving. SF_IO when the address cannot be bound. */
sf_status sf_receiver_http_start(sf_receiver_http *srv);
/* Stop accepting and finish requests in progress. Safe if never started. */
void sf_receiver_http_shutdown(sf_receiver_http *srv);
void sf_receiver_http_destroy(sf_receiver_http *srv);
/* Uploads in progress answered 503 and closed to give their buffers to
 * others, for `why` (spanfence_receiver_reclaimed_*), and the bytes they
 * held. Thread-safe. */
/* Connections closed to give their slot to a newcomer, and newcomers
 * refused (503) because every slot was closing already. Thread-safe. */
void sf_receiver_http_slots(const sf_receiver_http *srv, uint64_t *evicted, uint64_t *refused);
void sf_receiver_http_reclaimed(const sf_receiver_http *srv, sf_otlp_reclaim why,
                                uint64_t *requests, uint64_t *bytes);
/* Ask the reaper to reclaim uploads in progress now (the gRPC server's
 * calls under their share may be waiting for memory). Never blocks. */
void sf_receiver_http_reclaim_soon(void *srv);
/* The gRPC server's, asked when a request under its share finds memory
 * short and this server has nothing left to reclaim. */
void sf_receiver_http_set_peer(sf_receiver_http *srv, sf_otlp_reclaim_fn fn, void *peer);
/* Connections closed for crossing a rate limit, for `why`
 * (spanfence_receiver_closed_connections). Thread-safe. */
uint64_t sf_receiver_http_closed(const sf_receiver_http *srv, sf_otlp_close why);

#endif

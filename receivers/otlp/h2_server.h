/* receivers/otlp/h2_server.h: what the OTLP/gRPC server's event layer
 * (h2_server.c) offers the HTTP/2 connection: connection caps, pokes
 * between workers, the listening socket in a worker's epoll set. */
#ifndef SF_RECEIVERS_OTLP_H2_SERVER_H
#define SF_RECEIVERS_OTLP_H2_SERVER_H

#include "h2_conn.h"

/* Give back the place a connection from `bucket` took. */
void h2_caps_give(sf_receiver_grpc *srv, uint32_t bucket);
/* Ask the other workers to reclaim (or, parked_only, tell those with
 * parked calls that memory was freed). */
void h2_workers_poke(worker *self, bool parked_only);
/* Put the listening socket in (or out of) the worker's epoll set. */
void h2_worker_listen(worker *w, bool on);

#endif

/* receivers/otlp/otlp_grpc.h: the OTLP/gRPC server of the `otlp` receiver. */
#ifndef SF_RECEIVERS_OTLP_GRPC_H
#define SF_RECEIVERS_OTLP_GRPC_H

#include "otlp.h"

typedef struct sf_otlp_grpc_server sf_otlp_grpc_server;

/* Allocate (no threads, no socket). */
sf_status sf_otlp_grpc_create(sf_component *self, const sf_otlp_grpc_config *cfg,
                              unsigned max_depth, sf_otlp_grpc_server **out);
/* Bind and start the worker threads. SF_IO when the port cannot be bound. */
sf_status sf_otlp_grpc_start(sf_otlp_grpc_server *srv);
/* Stop accepting, let calls in flight finish (a grace period, then cancel),
 * join the threads. Safe if never started. */
void sf_otlp_grpc_shutdown(sf_otlp_grpc_server *srv);
void sf_otlp_grpc_destroy(sf_otlp_grpc_server *srv);

#endif

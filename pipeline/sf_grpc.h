/* sf_grpc.h: gRPC core set-up shared by the gRPC receiver and exporter:
 * grpc_init with gRPC's own log routed into spanfence's. */
#ifndef SF_GRPC_H
#define SF_GRPC_H

/* grpc_init(), after routing gRPC's log into sf_log at the current level
 * (debug shows gRPC's debug lines; otherwise errors only). Pair each call
 * with sf_grpc_shutdown(): gRPC counts them. */
void sf_grpc_init(void);
void sf_grpc_shutdown(void);

#endif

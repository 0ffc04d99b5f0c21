/* sf_grpc.h: gRPC core references for the gRPC receiver and exporter.
 * gRPC counts grpc_init() calls and tears itself down on the last
 * grpc_shutdown(), so each user holds one reference while it runs; the
 * process-wide set-up (gRPC's log into spanfence's) is sf_process_init's. */
#ifndef SF_GRPC_H
#define SF_GRPC_H

/* grpc_init(), after the process-wide set-up. Pair each call with
 * sf_grpc_shutdown(). */
void sf_grpc_init(void);
void sf_grpc_shutdown(void);

/* The name of a gRPC status code ("UNAVAILABLE"), for messages; "status"
 * for a code gRPC does not define. */
const char *sf_grpc_status_name(int code);

#endif

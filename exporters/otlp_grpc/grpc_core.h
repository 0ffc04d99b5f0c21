/* grpc_core.h: gRPC core references for the `otlp` exporter (and the tools
 * that speak gRPC core). gRPC counts grpc_init() calls and tears itself
 * down on the last grpc_shutdown(), so each user holds one reference while
 * it runs. gRPC core is linked where this file is, not into the core
 * library: a config without the `otlp` exporter never initialises it. */
#ifndef SF_GRPC_CORE_H
#define SF_GRPC_CORE_H

/* grpc_init(), after routing gRPC's log into sf_log (once per process) at
 * the level set now. Pair each call with sf_grpc_shutdown(). */
void sf_grpc_init(void);
void sf_grpc_shutdown(void);

/* The name of a gRPC status code ("UNAVAILABLE"), for messages; "status"
 * for a code gRPC does not define. */
const char *sf_grpc_status_name(int code);

#endif

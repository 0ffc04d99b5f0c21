/* sf_process.h: process-wide library state the core owns, set up once at
 * start-up instead of by whichever component happens to come first:
 * libcurl's global init (curl_global_init is not thread-safe, and is never
 * undone: curl_global_cleanup is not thread-safe either). libdeflate's
 * counted allocator is set by its one user (sf_compress.c). The collector
 * does not use gRPC core (the `otlp` exporter is libcurl over HTTP/2). */
#ifndef SF_PROCESS_H
#define SF_PROCESS_H

#include "sf_status.h"


/* Set the libraries up; idempotent and thread-safe (pthread_once), but
 * meant for the main thread before any component starts:
 * sf_service_create() calls it, and so must a test that creates a
 * component by hand. SF_IO (logged) when libcurl cannot initialise. */
sf_status sf_process_init(void);

#endif

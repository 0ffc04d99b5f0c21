/* sf_process.h: process-wide library state the core owns, set up once at
 * start-up. Today none is: libcurl is loaded and initialised once by its
 * first user (sf_libcurl.h: a component that uses it calls sf_libcurl_load
 * when it is created, on the main thread), and libdeflate's counted
 * allocator is set by its one user (sf_compress.c). The collector does not
 * use gRPC core (the `otlp` exporter is libcurl over HTTP/2). */
#ifndef SF_PROCESS_H
#define SF_PROCESS_H

#include "sf_status.h"


/* Set the libraries up; idempotent and thread-safe (pthread_once), but
 * meant for the main thread before any component starts:
 * sf_service_create() calls it, and so must a test that creates a
 * component by hand. */
sf_status sf_process_init(void);

#endif

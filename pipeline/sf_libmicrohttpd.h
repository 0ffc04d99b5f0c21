/* sf_libmicrohttpd.h: libmicrohttpd, loaded when the first HTTP endpoint
 * starts.
 *
 * No spanfence program links libmicrohttpd: Debian's is built with HTTPS,
 * so loading it loads GnuTLS with nettle, hogweed, gmp, p11-kit, tasn1,
 * idn2 and unistring, and runs GnuTLS's initialisation (ASN.1 trees): 2.3
 * MiB of idle RSS and half the instructions of a start of the default
 * config, for TLS spanfence never asks of it (bench/README.md, Start-up).
 * sf_libmicrohttpd.c defines the MHD_* functions spanfence calls as
 * forwarders to libmicrohttpd.so.12, opened (dlopen, RTLD_NOW) once by the
 * first call of any of them or of sf_libmicrohttpd_load; without the
 * library they fail as libmicrohttpd's own do (NULL, MHD_NO).
 *
 * The collector's own start goes further (sf_net.h, sf_net_http_defer):
 * its HTTP endpoints bind and listen at start, and libmicrohttpd is loaded
 * and their daemons started on those sockets after READY, so the gRPC
 * receiver and every port accept connections before it; a connection made
 * in between waits in the listen backlog. */
#ifndef SF_LIBMICROHTTPD_H
#define SF_LIBMICROHTTPD_H

#include <stdbool.h>

#include "sf_status.h"

/* Loads libmicrohttpd once (thread-safe: pthread_once). SF_IO when
 * libmicrohttpd.so.12 (Debian: libmicrohttpd12) or one of its functions is
 * missing; the reason in sf_libmicrohttpd_error(). */
sf_status sf_libmicrohttpd_load(void);

/* Why the load failed ("" when it did not, or has not been tried). */
const char *sf_libmicrohttpd_error(void);

#endif

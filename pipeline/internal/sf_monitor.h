/* internal/sf_monitor.h: the monitoring server on the telemetry address
 * (libmicrohttpd, one internal thread): GET /metrics (Prometheus text),
 * /status (the status document `spanfence status` reads) and /healthz
 * (`ok` while the process serves). It knows its sources only through the
 * callbacks it is given, never the service that gives them. */
#ifndef SF_MONITOR_H
#define SF_MONITOR_H

#include <stddef.h>

#include "../sf_status.h"

struct json_object;

typedef struct sf_monitor_source {
    void *ctx;
    /* Prometheus text into *out (sf_malloc'd); SF_ENOMEM answers 500. */
    sf_status (*metrics)(void *ctx, char **out, size_t *out_len);
    /* The status document, a new reference; NULL answers 500. */
    struct json_object *(*status)(void *ctx);
} sf_monitor_source;

typedef struct sf_monitor sf_monitor;

/* Listen on `address` ("host:port") and serve `src` (copied). SF_IO when it
 * cannot bind. */
sf_status sf_monitor_start(const char *address, const sf_monitor_source *src, sf_monitor **out);
void sf_monitor_stop(sf_monitor *m);    /* NULL is fine */

#endif

/* internal/sf_metrics_server.h: the Prometheus renderer and the /metrics
 * HTTP endpoint (libmicrohttpd, one internal thread) serving
 * sf_service_render_metrics(). */
#ifndef SF_METRICS_SERVER_H
#define SF_METRICS_SERVER_H

#include "../sf_service.h"

struct sf_component;

/* Prometheus text exposition of the counters of components[0, n) (each
 * type's own rows too) into *out (sf_malloc'd, NUL-terminated). SF_ENOMEM. */
sf_status sf_metrics_render(struct sf_component *components, size_t n, char **out,
                            size_t *out_len);

typedef struct sf_metrics_server sf_metrics_server;

/* Listen on `address` ("host:port"). SF_IO when it cannot bind. */
sf_status sf_metrics_server_start(const char *address, sf_service *svc, sf_metrics_server **out);
void sf_metrics_server_stop(sf_metrics_server *m);   /* NULL is fine */

#endif

/* receivers/otlp/otlp_http.h: the OTLP/HTTP server of the `otlp` receiver. */
#ifndef SF_RECEIVERS_OTLP_HTTP_H
#define SF_RECEIVERS_OTLP_HTTP_H

#include "otlp.h"

typedef struct sf_otlp_http_server sf_otlp_http_server;

/* Allocate (no threads, no socket). */
sf_status sf_otlp_http_create(sf_component *self, const sf_otlp_http_config *cfg,
                              unsigned max_depth, sf_otlp_http_server **out);
/* Bind and start serving. SF_IO when the address cannot be bound. */
sf_status sf_otlp_http_start(sf_otlp_http_server *srv);
/* Stop accepting and finish requests in progress. Safe if never started. */
void sf_otlp_http_shutdown(sf_otlp_http_server *srv);
void sf_otlp_http_destroy(sf_otlp_http_server *srv);

#endif

/* exporters/otlp_http/otlp_http.h: the `otlphttp` exporter's config. */
#ifndef SF_EXPORTERS_OTLP_HTTP_H
#define SF_EXPORTERS_OTLP_HTTP_H

#include "sf_component.h"
#include "sf_compress.h"
#include "sf_sender.h"

enum { SF_ENCODING_PROTO = 0 };

/* tls: upstream's configtls client keys that libcurl can honour. */
typedef struct sf_otlphttp_tls {
    bool present;
    char *ca_file;                  /* PEM CAs of the gateway (default: system roots) */
    char *cert_file;                /* PEM client certificate (mutual TLS), with key_file */
    char *key_file;
    int min_version;                /* SF_TLS_* index: "1.2" (default), "1.3", "1.0", "1.1" */
    int max_version;                /* 0: none */
    /* The name SNI sends and the certificate is checked against, instead
     * of the endpoint's host (which still goes in the Host header and is
     * still the address connected to). NULL: the endpoint's host. */
    char *server_name_override;
    bool insecure;                  /* upstream's; only checked against server_name_override */
} sf_otlphttp_tls;

enum { SF_TLS_V1_2 = 0, SF_TLS_V1_3, SF_TLS_V1_0, SF_TLS_V1_1 };

typedef struct sf_otlphttp_config {
    sf_otlphttp_tls tls;
    char *endpoint;                 /* base URL; /v1/<signal> is appended */
    char *traces_endpoint;          /* full URL, overrides endpoint */
    char *logs_endpoint;            /* the same for logs */
    char *metrics_endpoint;         /* the same for metrics */
    sf_strmap headers;              /* values may hold secrets: never logged */
    int compression;                /* sf_compression */
    sf_compression_params compression_params;
    int encoding;                   /* SF_ENCODING_* */
    int64_t timeout;                /* ms */
    sf_queue_config sending_queue;
    sf_retry_config retry_on_failure;
} sf_otlphttp_config;

extern const sf_config_row sf_otlphttp_config_map[];
/* The <signal>_endpoint of `c` (NULL: endpoint + /v1/<signal>). */
const char *sf_otlphttp_signal_endpoint(const sf_otlphttp_config *c, sf_signal signal);
sf_status sf_otlphttp_check(sf_cfg_ctx *ctx, void *config);
/* The type's describe_export: endpoint (traces_endpoint overrides it),
 * queue and retries, for the policy. */
bool sf_otlphttp_describe(const void *config, sf_export_desc *out);

#endif

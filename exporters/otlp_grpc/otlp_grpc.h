/* exporters/otlp_grpc/otlp_grpc.h: the otlp (gRPC) exporter's config:
 * its struct, its config map and its cross-field check. */
#ifndef SF_EXPORTERS_OTLP_GRPC_H
#define SF_EXPORTERS_OTLP_GRPC_H

#include "sf_component.h"
#include "sf_compress.h"
#include "sf_sender.h"

typedef struct sf_otlp_tls_config {
    bool present;
    bool insecure;                  /* plaintext h2c: no TLS at all */
    char *ca_file;                  /* PEM roots; NULL: gRPC's default roots */
    char *cert_file;                /* client certificate (mTLS), with key_file */
    char *key_file;
    /* The name SNI sends and the certificate is checked against, and the
     * calls' :authority, instead of the endpoint's host (the connection
     * still goes to the endpoint). NULL: the endpoint's host. */
    char *server_name_override;
} sf_otlp_tls_config;

typedef struct sf_otlpgrpc_config {
    char *endpoint;                 /* host:port or dns:///host:port */
    sf_otlp_tls_config tls;
    sf_strmap headers;              /* gRPC metadata; values may be secrets: never logged */
    int compression;                /* sf_compression */
    sf_compression_params compression_params;
    int64_t timeout;                /* ms, deadline of one Export call */
    sf_queue_config sending_queue;
    sf_retry_config retry_on_failure;
} sf_otlpgrpc_config;

extern const sf_config_row sf_otlpgrpc_config_map[];
/* The check() of the type: endpoint form, TLS files readable and paired,
 * metadata keys and values gRPC accepts. Reports through `ctx`. */
sf_status sf_otlpgrpc_check(sf_cfg_ctx *ctx, void *config);
/* The type's describe_export: endpoint, queue and retries, for the policy. */
bool sf_otlpgrpc_describe(const void *config, sf_export_desc *out);

#endif

/* receivers/prometheus/prometheus.h: the `prometheus` receiver's config,
 * in upstream's layout (receiver/prometheusreceiver: `config:` is a
 * Prometheus configuration, of which global and scrape_configs with
 * static_configs are read), and the config file's functions. */
#ifndef SF_RECEIVERS_PROMETHEUS_H
#define SF_RECEIVERS_PROMETHEUS_H

#include "sf_component.h"

/* Spanfence's bounds where Prometheus has none by default (receivers/README.md). */
#define SF_PROM_DEFAULT_BODY_SIZE_LIMIT "16MiB"
#define SF_PROM_MAX_TARGETS 64

typedef struct sf_prom_tls_config {
    bool present;
    char *ca_file;
    char *cert_file;
    char *key_file;
    char *server_name;
    bool insecure_skip_verify;
} sf_prom_tls_config;

typedef struct sf_prom_static_config {
    sf_strlist targets;             /* host:port */
    sf_strmap labels;
} sf_prom_static_config;

/* `params`: name -> list of values, flattened into pairs (a name repeats
 * for each of its values). */
typedef struct sf_prom_params {
    size_t n;
    char **names;
    char **values;
} sf_prom_params;

typedef struct sf_prom_scrape_config {
    char *job_name;
    int64_t scrape_interval;        /* ms; 0: the global one */
    int64_t scrape_timeout;         /* ms; 0: the global one (at most the interval) */
    char *metrics_path;
    int scheme;                     /* 0 http, 1 https */
    bool honor_labels;
    bool honor_timestamps;
    bool enable_compression;        /* Accept-Encoding: gzip */
    bool follow_redirects;
    sf_prom_params params;
    sf_prom_tls_config tls_config;
    sf_cfg_list static_configs;     /* of sf_prom_static_config */
    sf_strlist scrape_protocols;    /* Accept negotiation, in order of preference */
    int64_t body_size_limit;        /* bytes, decompressed */
    int64_t sample_limit;
    int64_t label_limit;
    int64_t label_name_length_limit;
    int64_t label_value_length_limit;
} sf_prom_scrape_config;

typedef struct sf_prom_global_config {
    bool present;
    int64_t scrape_interval;        /* ms */
    int64_t scrape_timeout;         /* ms */
} sf_prom_global_config;

typedef struct sf_prom_config_section {
    bool present;
    sf_prom_global_config global;
    sf_cfg_list scrape_configs;     /* of sf_prom_scrape_config */
} sf_prom_config_section;

typedef struct sf_prometheus_receiver_config {
    sf_prom_config_section config;
    int64_t line_length_limit;      /* bytes of one exposition line */
} sf_prometheus_receiver_config;

extern const sf_config_row sf_prometheus_receiver_config_map[];
/* Cross-field checks: job names present and unique, targets host:port,
 * timeouts within intervals, scrape_protocols known, at most
 * SF_PROM_MAX_TARGETS targets; fills each scrape config's interval and
 * timeout from `global` when left out. */
sf_status sf_prometheus_receiver_check(sf_cfg_ctx *ctx, void *config);

/* The Accept header Prometheus sends for `protocols` (NULL or empty: its
 * default, OpenMetrics 1.0.0, then 0.0.1, then text 0.0.4), into buf. */
void sf_prom_accept_header(const sf_strlist *protocols, char *buf, size_t size);

/* Split "host:port" / "[v6]:port" into host and port; false when it is
 * not one. */
bool sf_prom_split_target(const char *target, char *host, size_t host_size, char *port,
                          size_t port_size);

#endif

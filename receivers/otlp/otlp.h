/* receivers/otlp/otlp.h: the `otlp` receiver's config and the entry points
 * of its two protocol servers (gRPC in receiver_grpc.c, HTTP in receiver_http.c). */
#ifndef SF_RECEIVERS_OTLP_H
#define SF_RECEIVERS_OTLP_H

#include "sf_component.h"

/* keepalive (upstream's layout); durations in ms, 0 = off / no limit. */
typedef struct sf_otlp_keepalive_server {
    bool present;
    int64_t time;                   /* ping an idle client this often */
    int64_t timeout;                /* ... and close if it does not answer within this */
    int64_t max_connection_idle;    /* close a connection without calls after this */
    int64_t max_connection_age;
    int64_t max_connection_age_grace;
} sf_otlp_keepalive_server;

typedef struct sf_otlp_keepalive_enforcement {
    bool present;
    int64_t min_time;               /* pings from clients more often than this are strikes */
    bool permit_without_stream;
} sf_otlp_keepalive_enforcement;

typedef struct sf_otlp_keepalive_config {
    bool present;
    sf_otlp_keepalive_server server_parameters;
    sf_otlp_keepalive_enforcement enforcement_policy;
} sf_otlp_keepalive_config;

typedef struct sf_receiver_grpc_config {
    bool present;
    char *endpoint;                 /* host:port */
    int64_t max_recv_msg_size_mib;
    int64_t max_concurrent_streams; /* per client connection */
    int64_t workers;                /* threads, each with its own epoll loop */
    int64_t max_connections;        /* client connections in all */
    int64_t max_connections_per_peer;   /* ... from one peer address */
    sf_otlp_keepalive_config keepalive;
} sf_receiver_grpc_config;

typedef struct sf_receiver_http_config {
    bool present;
    char *endpoint;
    char *traces_url_path;
    char *metrics_url_path;     /* answered only when a metrics pipeline lists the receiver */
    char *logs_url_path;        /* the same for logs */
    int64_t max_request_body_size;  /* bytes, after decompression */
    int64_t read_header_timeout;    /* ms: a connection's request headers must be in by then */
    int64_t read_timeout;           /* ms: a whole request, headers and body */
    int64_t idle_timeout;           /* ms: a keep-alive connection between requests */
} sf_receiver_http_config;

typedef struct sf_otlp_protocols_config {
    bool present;
    sf_receiver_grpc_config grpc;
    sf_receiver_http_config http;
} sf_otlp_protocols_config;

typedef struct sf_otlp_receiver_config {
    sf_otlp_protocols_config protocols;
    int64_t max_value_depth;        /* AnyValue nesting cap, checked before decoding */
} sf_otlp_receiver_config;

/* Why a request in progress was answered (UNAVAILABLE / 503) and freed
 * before it was complete (spanfence_receiver_reclaimed_*{reason}). */
typedef enum sf_otlp_reclaim {
    SF_OTLP_RECLAIM_MEMORY,         /* "memory_short": a complete call would be refused */
    SF_OTLP_RECLAIM_BUDGET,         /* "buffer_budget": HTTP bodies' share of the limit is full */
    SF_OTLP_RECLAIM_COUNT
} sf_otlp_reclaim;

extern const sf_config_row sf_otlp_receiver_config_map[];
sf_status sf_otlp_receiver_check(sf_cfg_ctx *ctx, void *config);
/* The type's describe_listen: the gRPC and HTTP endpoints configured
 * (defaults included), for the policy's loopback rule. */
size_t sf_otlp_receiver_describe_listen(const void *config, sf_listen_desc *out, size_t max);

#endif

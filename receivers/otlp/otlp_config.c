/* receivers/otlp/otlp_config.c: the `otlp` receiver's config map, in the
 * upstream collector's layout (protocols.grpc / protocols.http). */
#include "otlp.h"

#include <stddef.h>

/* A numeric default as the text a config row takes, from its one
 * definition. */
#define DEF_TEXT_(x) #x
#define DEF_TEXT(x) DEF_TEXT_(x)

static const sf_config_row keepalive_server_rows[] = {
    { .key = "time", .type = SF_CFG_DURATION, .def = "1m",
      .offset = offsetof(sf_otlp_keepalive_server, time),
      .help = "ping a client after this long without activity (0: never)",
      .min = 0, .max = 86400000 },
    { .key = "timeout", .type = SF_CFG_DURATION, .def = "20s",
      .offset = offsetof(sf_otlp_keepalive_server, timeout),
      .help = "close the connection when a ping is not answered within this",
      .min = 1000, .max = 3600000 },
    { .key = "max_connection_idle", .type = SF_CFG_DURATION, .def = "5m",
      .offset = offsetof(sf_otlp_keepalive_server, max_connection_idle),
      .help = "close (GOAWAY) a connection that had no call for this long (0: never)",
      .min = 0, .max = 86400000 },
    { .key = "max_connection_age", .type = SF_CFG_DURATION, .def = "0",
      .offset = offsetof(sf_otlp_keepalive_server, max_connection_age),
      .help = "close (GOAWAY) a connection this old (0: never)", .min = 0, .max = 86400000 },
    { .key = "max_connection_age_grace", .type = SF_CFG_DURATION, .def = "0",
      .offset = offsetof(sf_otlp_keepalive_server, max_connection_age_grace),
      .help = "time calls get to finish after max_connection_age (0: unlimited)",
      .min = 0, .max = 86400000 },
    { 0 }
};

static const sf_config_row keepalive_enforcement_rows[] = {
    { .key = "min_time", .type = SF_CFG_DURATION, .def = "5m",
      .offset = offsetof(sf_otlp_keepalive_enforcement, min_time),
      .help = "least interval between a client's pings; faster ones end the connection",
      .min = 0, .max = 86400000 },
    { .key = "permit_without_stream", .type = SF_CFG_BOOL, .def = "false",
      .offset = offsetof(sf_otlp_keepalive_enforcement, permit_without_stream),
      .help = "allow client pings while no call is open" },
    { 0 }
};

static const sf_config_row keepalive_rows[] = {
    { .key = "server_parameters", .type = SF_CFG_SECTION,
      .offset = offsetof(sf_otlp_keepalive_config, server_parameters),
      .sub = keepalive_server_rows, .help = "pings, idle and age limits of client connections" },
    { .key = "enforcement_policy", .type = SF_CFG_SECTION,
      .offset = offsetof(sf_otlp_keepalive_config, enforcement_policy),
      .sub = keepalive_enforcement_rows, .help = "what clients' own pings may do" },
    { 0 }
};

static const sf_config_row grpc_rows[] = {
    { .key = "endpoint", .type = SF_CFG_STR, .def = "127.0.0.1:4317",
      .offset = offsetof(sf_receiver_grpc_config, endpoint),
      .help = "host:port to listen on for OTLP/gRPC" },
    { .key = "max_recv_msg_size_mib", .type = SF_CFG_INT, .def = "4",
      .offset = offsetof(sf_receiver_grpc_config, max_recv_msg_size_mib),
      .help = "largest request accepted, in MiB", .min = 1, .max = 1024 },
    { .key = "max_concurrent_streams", .type = SF_CFG_INT, .def = "16",
      .offset = offsetof(sf_receiver_grpc_config, max_concurrent_streams),
      .help = "concurrent calls per client connection; more wait in the client",
      .min = 1, .max = 1000000 },
    { .key = "workers", .type = SF_CFG_INT, .def = "0",
      .offset = offsetof(sf_receiver_grpc_config, workers),
      .help = "receiver threads, each with its own event loop; 0: one per CPU the "
              "process may run on (its affinity mask), at most 8", .min = 0, .max = 64 },
    { .key = "max_connections", .type = SF_CFG_INT, .def = "1024",
      .offset = offsetof(sf_receiver_grpc_config, max_connections),
      .help = "client connections served at once (with a memory_limiter, at most a quarter "
              "of its limit at 32 KiB each); past it a new connection replaces the "
              "longest-idle one (no call open), or is closed", .min = 1, .max = 65535 },
    { .key = "max_connections_per_peer", .type = SF_CFG_INT, .def = "1024",
      .offset = offsetof(sf_receiver_grpc_config, max_connections_per_peer),
      .help = "client connections from one peer address, with the same replacement",
      .min = 1, .max = 65535 },
    { .key = "read_buffer_size", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { .key = "write_buffer_size", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { .key = "include_metadata", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { .key = "keepalive", .type = SF_CFG_SECTION, .offset = offsetof(sf_receiver_grpc_config, keepalive),
      .sub = keepalive_rows, .help = "keepalive pings and connection idle/age limits" },
    { .key = "transport", .type = SF_CFG_ENUM, .def = "tcp", .offset = SF_CFG_NO_FIELD,
      .choices = "tcp", .help = "only tcp is supported" },
    { .key = "tls", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "tls is not supported on the receiver: spanfence listens inside the VM, on loopback" },
    { .key = "auth", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "auth is not supported on the receiver" },
    { 0 }
};

static const sf_config_row http_rows[] = {
    { .key = "endpoint", .type = SF_CFG_STR, .def = "127.0.0.1:4318",
      .offset = offsetof(sf_receiver_http_config, endpoint),
      .help = "host:port to listen on for OTLP/HTTP" },
    { .key = "traces_url_path", .type = SF_CFG_STR, .def = SF_OTLP_TRACES_PATH,
      .offset = offsetof(sf_receiver_http_config, traces_url_path),
      .help = "URL path that accepts trace exports" },
    { .key = "metrics_url_path", .type = SF_CFG_STR, .def = "/v1/metrics",
      .offset = offsetof(sf_receiver_http_config, metrics_url_path),
      .help = "URL path that accepts metrics exports when a metrics pipeline lists the "
              "receiver (else 404)" },
    { .key = "logs_url_path", .type = SF_CFG_STR, .def = "/v1/logs",
      .offset = offsetof(sf_receiver_http_config, logs_url_path),
      .help = "URL path that accepts logs exports when a logs pipeline lists the receiver "
              "(else 404)" },
    { .key = "max_request_body_size", .type = SF_CFG_SIZE, .def = "20MiB",
      .offset = offsetof(sf_receiver_http_config, max_request_body_size),
      .help = "largest request body, after decompression", .min = 1024,
      .max = (int64_t)1 << 30 },
    { .key = "read_header_timeout", .type = SF_CFG_DURATION, .def = "10s",
      .offset = offsetof(sf_receiver_http_config, read_header_timeout),
      .help = "a connection whose request headers are not all in by then is closed",
      .min = 100, .max = 3600000 },
    { .key = "read_timeout", .type = SF_CFG_DURATION, .def = "30s",
      .offset = offsetof(sf_receiver_http_config, read_timeout),
      .help = "a request (headers and body) not read by then is closed",
      .min = 100, .max = 3600000 },
    { .key = "idle_timeout", .type = SF_CFG_DURATION, .def = "30s",
      .offset = offsetof(sf_receiver_http_config, idle_timeout),
      .help = "a keep-alive connection idle between requests for this long is closed",
      .min = 100, .max = 3600000 },
    { .key = "write_timeout", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { .key = "include_metadata", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { .key = "cors", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "cors is not supported: no browser sends to an in-VM collector" },
    { .key = "tls", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "tls is not supported on the receiver: spanfence listens inside the VM, on loopback" },
    { .key = "auth", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "auth is not supported on the receiver" },
    { 0 }
};

static const sf_config_row protocol_rows[] = {
    { .key = "grpc", .type = SF_CFG_SECTION, .offset = offsetof(sf_otlp_protocols_config, grpc),
      .sub = grpc_rows, .help = "serve OTLP/gRPC" },
    { .key = "http", .type = SF_CFG_SECTION, .offset = offsetof(sf_otlp_protocols_config, http),
      .sub = http_rows, .help = "serve OTLP/HTTP (protobuf and JSON)" },
    { 0 }
};

const sf_config_row sf_otlp_receiver_config_map[] = {
    { .key = "protocols", .type = SF_CFG_SECTION,
      .offset = offsetof(sf_otlp_receiver_config, protocols), .sub = protocol_rows,
      .help = "the protocols to serve; at least one" },
    { .key = "max_value_depth", .type = SF_CFG_INT, .def = DEF_TEXT(SF_OTLP_DEFAULT_MAX_DEPTH),
      .offset = offsetof(sf_otlp_receiver_config, max_value_depth),
      .help = "deepest nesting of array/key-value-list attribute values accepted",
      .min = 1, .max = 256 },
    { 0 }
};

sf_status sf_otlp_receiver_check(sf_cfg_ctx *ctx, void *config)
{
    sf_otlp_receiver_config *c = config;

    if (!c->protocols.grpc.present && !c->protocols.http.present) {
        sf_cfg_error(ctx, sf_cfg_node(ctx), "protocols",
                     "at least one protocol ('grpc' or 'http') must be configured");
        return SF_CONFIG;
    }
    return SF_OK;
}

size_t sf_otlp_receiver_describe_listen(const void *config, sf_listen_desc *out, size_t max)
{
    const sf_otlp_receiver_config *c = config;
    size_t n = 0;

    if (c->protocols.grpc.present && n < max)
        out[n++] = (sf_listen_desc){ .path = "protocols.grpc.endpoint",
                                     .endpoint = c->protocols.grpc.endpoint };
    if (c->protocols.http.present && n < max)
        out[n++] = (sf_listen_desc){ .path = "protocols.http.endpoint",
                                     .endpoint = c->protocols.http.endpoint };
    return n;
}

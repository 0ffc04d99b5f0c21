/* receivers/otlp/otlp.c: the `otlp` receiver: one component serving the
 * protocols its config enables (gRPC in receiver_grpc.c, HTTP in receiver_http.c),
 * all feeding the same pipelines through sf_component_emit(). */
#include "otlp.h"
#include "receiver_grpc.h"
#include "receiver_http.h"

#include <stdio.h>

typedef struct otlp_receiver {
    const sf_otlp_receiver_config *cfg;
    sf_receiver_grpc *grpc;
    sf_receiver_http *http;
    sf_otlp_clients *clients;   /* both servers': decompression per client */
} otlp_receiver;

static sf_status otlp_create(sf_component *self, const void *config)
{
    const sf_otlp_receiver_config *cfg = config;
    otlp_receiver *r;
    unsigned transports = 0;
    sf_status st;

    r = sf_calloc(1, sizeof(*r));
    if (r == NULL)
        return SF_ENOMEM;
    r->cfg = cfg;
    {
        /* A client's debt is bounded by the largest message either server
         * inflates. */
        size_t most = (size_t)cfg->protocols.grpc.max_recv_msg_size_mib * 1024 * 1024;

        if ((size_t)cfg->protocols.http.max_request_body_size > most)
            most = (size_t)cfg->protocols.http.max_request_body_size;
        r->clients = sf_otlp_clients_create(most);
        if (r->clients == NULL) {
            st = SF_ENOMEM;
            goto out_free;
        }
    }
    if (cfg->protocols.grpc.present) {
        st = sf_receiver_grpc_create(self, &cfg->protocols.grpc, (unsigned)cfg->max_value_depth,
                                 r->clients, &r->grpc);
        if (st != SF_OK)
            goto out_free;
        transports |= 1u << SF_TRANSPORT_GRPC;
    }
    if (cfg->protocols.http.present) {
        st = sf_receiver_http_create(self, &cfg->protocols.http, (unsigned)cfg->max_value_depth,
                                 r->clients, &r->http);
        if (st != SF_OK)
            goto out_free;
        transports |= 1u << SF_TRANSPORT_HTTP;
    }
    if (r->grpc != NULL && r->http != NULL) {
        /* The shares span both servers: each asks the other to reclaim. */
        sf_receiver_grpc_set_peer(r->grpc, sf_receiver_http_reclaim_soon, r->http);
        sf_receiver_http_set_peer(r->http, sf_receiver_grpc_reclaim_soon, r->grpc);
    }
    sf_component_set_transports(self, transports);
    sf_component_set_ctx(self, r);
    return SF_OK;

out_free:
    sf_receiver_grpc_destroy(r->grpc);
    sf_otlp_clients_destroy(r->clients);
    sf_free(r);
    return st;
}

static sf_status otlp_start(sf_component *self)
{
    otlp_receiver *r = sf_component_ctx(self);
    sf_status st = SF_OK;
    size_t soft, hard;

    /* The shares of held memory are at least a part of the soft limit (the
     * memory limiter's refusals start there). */
    sf_alloc_limits(&soft, &hard);
    sf_otlp_clients_set_capacity(r->clients, soft);
    if (r->grpc != NULL)
        st = sf_receiver_grpc_start(r->grpc);
    if (st == SF_OK && r->http != NULL)
        st = sf_receiver_http_start(r->http);
    return st;
}

static void otlp_shutdown(sf_component *self)
{
    otlp_receiver *r = sf_component_ctx(self);

    if (r->http != NULL)
        sf_receiver_http_shutdown(r->http);
    if (r->grpc != NULL)
        sf_receiver_grpc_shutdown(r->grpc);
}

static void otlp_destroy(sf_component *self)
{
    otlp_receiver *r = sf_component_ctx(self);

    if (r == NULL)
        return;
    sf_receiver_http_destroy(r->http);
    sf_receiver_grpc_destroy(r->grpc);
    sf_otlp_clients_destroy(r->clients);
    sf_free(r);
}

static const char otlp_metrics_help[] =
    "# HELP spanfence_receiver_reclaimed_requests Requests in progress answered UNAVAILABLE / "
    "503 and freed for others, the most bytes with the least recent progress first: partial "
    "gRPC messages and HTTP uploads when memory was short (reason memory_short), HTTP uploads "
    "when the bodies' buffer budget was full (buffer_budget).\n"
    "# TYPE spanfence_receiver_reclaimed_requests counter\n"
    "# HELP spanfence_receiver_reclaimed_bytes Buffered bytes those reclaimed requests held.\n"
    "# TYPE spanfence_receiver_reclaimed_bytes counter\n"
    "# HELP spanfence_receiver_evicted_connections Connections closed to give their slot to a "
    "new one past the caps, the least progress first: OTLP/HTTP past 512 (headers incomplete, "
    "then uploads, idle keep-alive last); OTLP/gRPC past max_connections (idle ones, then "
    "ones whose calls went silent).\n"
    "# TYPE spanfence_receiver_evicted_connections counter\n"
    "# HELP spanfence_receiver_refused_connections New OTLP/HTTP connections answered 503 and "
    "closed because every other slot was closing already.\n"
    "# TYPE spanfence_receiver_refused_connections counter\n"
    "# HELP spanfence_receiver_closed_connections Connections closed for crossing a rate limit: "
    "gRPC frames that bring nothing (window_update_flood, empty_data_flood, priority_flood, "
    "reset_flood: GOAWAY ENHANCE_YOUR_CALM) and, on both transports, calls refused again and "
    "again for the connection's decompression rate (decompression).\n"
    "# TYPE spanfence_receiver_closed_connections counter\n"
    "# HELP spanfence_receiver_reclaimed_share_requests Reclaimed requests (as "
    "spanfence_receiver_reclaimed_requests) whose client held more than its share of the "
    "bytes held for incomplete messages (share over) or not (under): over-share clients are "
    "reclaimed first.\n"
    "# TYPE spanfence_receiver_reclaimed_share_requests counter\n"
    "# HELP spanfence_receiver_memory_share_bytes Each client's share of the memory held for "
    "incomplete messages (gRPC message buffers, HTTP upload bodies): what they hold / clients "
    "holding, at least a 32nd of the soft memory limit; 0 without a limit.\n"
    "# TYPE spanfence_receiver_memory_share_bytes gauge\n"
    "# HELP spanfence_receiver_memory_clients Clients (a loopback connection, else a peer "
    "address) holding bytes for incomplete messages.\n"
    "# TYPE spanfence_receiver_memory_clients gauge\n"
    "# HELP spanfence_receiver_memory_held_bytes Bytes held for incomplete messages, both "
    "transports.\n"
    "# TYPE spanfence_receiver_memory_held_bytes gauge\n";

/* The receiver's own series: what was taken back from requests in
 * progress, per transport and reason. */
static size_t otlp_metrics(sf_component *self, char *buf, size_t size)
{
    static const char *const reasons[SF_OTLP_RECLAIM_COUNT] = { "memory_short", "buffer_budget" };
    otlp_receiver *r = sf_component_ctx(self);
    size_t len = 0;

    if (size > 0)
        buf[0] = '\0';
    if (r == NULL)
        return 0;
    for (int k = 0; k < SF_OTLP_RECLAIM_COUNT; k++) {
        for (int t = 0; t < 2; t++) {
            uint64_t calls = 0, bytes = 0;
            const char *transport = t == 0 ? "grpc" : "http";
            int n;

            if (t == 0 && r->grpc != NULL && k == SF_OTLP_RECLAIM_MEMORY)
                sf_receiver_grpc_reclaimed(r->grpc, &calls, &bytes);
            else if (t == 1 && r->http != NULL)
                sf_receiver_http_reclaimed(r->http, (sf_otlp_reclaim)k, &calls, &bytes);
            else
                continue;           /* gRPC has no bodies' budget */
            n = snprintf(len < size ? buf + len : NULL, len < size ? size - len : 0,
                         "spanfence_receiver_reclaimed_requests{receiver=\"%s\",transport=\"%s\","
                         "reason=\"%s\"} %llu\n"
                         "spanfence_receiver_reclaimed_bytes{receiver=\"%s\",transport=\"%s\","
                         "reason=\"%s\"} %llu\n",
                         sf_component_id(self), transport, reasons[k], (unsigned long long)calls,
                         sf_component_id(self), transport, reasons[k], (unsigned long long)bytes);
            if (n > 0)
                len += (size_t)n;
        }
    }
    for (int k = 0; k < SF_OTLP_CLOSE_COUNT; k++) {
        for (int t = 0; t < 2; t++) {
            uint64_t n_closed;
            int n;

            /* The frame floods are HTTP/2's: gRPC only. */
            if (t == 0 && r->grpc != NULL)
                n_closed = sf_receiver_grpc_closed(r->grpc, (sf_otlp_close)k);
            else if (t == 1 && r->http != NULL && k == SF_OTLP_CLOSE_DECOMPRESSION)
                n_closed = sf_receiver_http_closed(r->http, (sf_otlp_close)k);
            else
                continue;
            n = snprintf(len < size ? buf + len : NULL, len < size ? size - len : 0,
                         "spanfence_receiver_closed_connections{receiver=\"%s\",transport=\"%s\","
                         "reason=\"%s\"} %llu\n", sf_component_id(self), t == 0 ? "grpc" : "http",
                         sf_otlp_close_label((sf_otlp_close)k), (unsigned long long)n_closed);
            if (n > 0)
                len += (size_t)n;
        }
    }
    {
        size_t share, clients, held;
        int n;

        for (int t = 0; t < 2; t++) {
            if ((t == 0 && r->grpc == NULL) || (t == 1 && r->http == NULL))
                continue;
            for (int over = 1; over >= 0; over--) {
                n = snprintf(len < size ? buf + len : NULL, len < size ? size - len : 0,
                             "spanfence_receiver_reclaimed_share_requests{receiver=\"%s\","
                             "transport=\"%s\",share=\"%s\"} %llu\n", sf_component_id(self),
                             t == 0 ? "grpc" : "http", over ? "over" : "under",
                             (unsigned long long)sf_otlp_reclaimed_count(r->clients,
                                                                         (unsigned)t, over));
                if (n > 0)
                    len += (size_t)n;
            }
        }
        sf_otlp_share_state(r->clients, &share, &clients, &held);
        n = snprintf(len < size ? buf + len : NULL, len < size ? size - len : 0,
                     "spanfence_receiver_memory_share_bytes{receiver=\"%s\"} %zu\n"
                     "spanfence_receiver_memory_clients{receiver=\"%s\"} %zu\n"
                     "spanfence_receiver_memory_held_bytes{receiver=\"%s\"} %zu\n",
                     sf_component_id(self), share, sf_component_id(self), clients,
                     sf_component_id(self), held);
        if (n > 0)
            len += (size_t)n;
    }
    if (r->grpc != NULL) {
        int n = snprintf(len < size ? buf + len : NULL, len < size ? size - len : 0,
                         "spanfence_receiver_evicted_connections{receiver=\"%s\",transport=\"grpc\"} "
                         "%llu\n", sf_component_id(self),
                         (unsigned long long)sf_receiver_grpc_evicted(r->grpc));

        if (n > 0)
            len += (size_t)n;
    }
    if (r->http != NULL) {
        uint64_t evicted, refused;
        int n;

        sf_receiver_http_slots(r->http, &evicted, &refused);
        n = snprintf(len < size ? buf + len : NULL, len < size ? size - len : 0,
                     "spanfence_receiver_evicted_connections{receiver=\"%s\",transport=\"http\"} "
                     "%llu\n"
                     "spanfence_receiver_refused_connections{receiver=\"%s\",transport=\"http\"} "
                     "%llu\n", sf_component_id(self), (unsigned long long)evicted,
                     sf_component_id(self), (unsigned long long)refused);
        if (n > 0)
            len += (size_t)n;
    }
    return len;
}

/* health_check: the gRPC listener failing to accept (fds, memory). */
static bool otlp_unhealthy(sf_component *self, char *why, size_t size)
{
    otlp_receiver *r = sf_component_ctx(self);

    if (r == NULL || r->grpc == NULL || sf_receiver_grpc_accepting(r->grpc))
        return false;
    snprintf(why, size, "OTLP/gRPC cannot accept connections (out of file descriptors or "
             "memory); retrying");
    return true;
}

const sf_component_type sf_otlp_receiver_type = {
    .name = "otlp",
    .kind = SF_KIND_RECEIVER,
    .description = "OTLP over gRPC and HTTP: traces, logs and metrics",
    .signals = SF_SIGNALS_ALL,
    .config_size = sizeof(sf_otlp_receiver_config),
    .config_map = sf_otlp_receiver_config_map,
    .check = sf_otlp_receiver_check,
    .create = otlp_create,
    .start = otlp_start,
    .shutdown = otlp_shutdown,
    .destroy = otlp_destroy,
    .describe_listen = sf_otlp_receiver_describe_listen,
    .unhealthy = otlp_unhealthy,
    .metrics = otlp_metrics,
    .metrics_help = otlp_metrics_help,
};

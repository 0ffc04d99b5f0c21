/* receivers/otlp/otlp.c: the `otlp` receiver: one component serving the
 * protocols its config enables, each through its server's type
 * (otlp_server.h: gRPC in h2_server.c, HTTP in receiver_http.c), all
 * feeding the same pipelines through sf_component_emit(). */
#include "otlp.h"
#include "otlp_server.h"

#include <stdio.h>

/* One protocol's server: its type, and the instance (NULL: the protocol
 * is off). */
typedef struct otlp_server {
    const otlp_server_type *type;
    void *srv;
} otlp_server;

enum { OTLP_SERVERS = 2 };

typedef struct otlp_receiver {
    const sf_otlp_receiver_config *cfg;
    otlp_server servers[OTLP_SERVERS];  /* gRPC, then HTTP: the order of their series */
    sf_otlp_clients *clients;   /* both servers': decompression per client */
} otlp_receiver;

static void servers_destroy(otlp_receiver *r)
{
    for (int i = OTLP_SERVERS - 1; i >= 0; i--) {
        if (r->servers[i].srv != NULL)
            r->servers[i].type->destroy(r->servers[i].srv);
        r->servers[i].srv = NULL;
    }
}

static sf_status otlp_create(sf_component *self, const void *config)
{
    const sf_otlp_receiver_config *cfg = config;
    const sf_otlp_protocols_config *p = &cfg->protocols;
    const void *const configs[OTLP_SERVERS] = { p->grpc.present ? &p->grpc : NULL,
                                                p->http.present ? &p->http : NULL };
    otlp_server *s;
    otlp_receiver *r;
    unsigned transports = 0;
    sf_status st;

    r = sf_calloc(1, sizeof(*r));
    if (r == NULL)
        return SF_ENOMEM;
    r->cfg = cfg;
    r->servers[0].type = &sf_otlp_grpc_server;
    r->servers[1].type = &sf_otlp_http_server;
    {
        /* A client's debt is bounded by the largest message either server
         * inflates. */
        size_t most = (size_t)p->grpc.max_recv_msg_size_mib * 1024 * 1024;

        if ((size_t)p->http.max_request_body_size > most)
            most = (size_t)p->http.max_request_body_size;
        r->clients = sf_otlp_clients_create(most);
        if (r->clients == NULL) {
            st = SF_ENOMEM;
            goto out_free;
        }
    }
    for (int i = 0; i < OTLP_SERVERS; i++) {
        const otlp_server_env env = { .self = self, .max_depth = (unsigned)cfg->max_value_depth,
                                      .clients = r->clients };

        s = &r->servers[i];
        if (configs[i] == NULL)
            continue;
        st = s->type->create(&env, configs[i], &s->srv);
        if (st != SF_OK)
            goto out_free;
        transports |= 1u << s->type->transport;
    }
    s = r->servers;
    if (s[0].srv != NULL && s[1].srv != NULL) {
        /* The shares span both servers: each asks the other to reclaim. */
        s[0].type->set_peer(s[0].srv, s[1].type->reclaim_soon, s[1].srv);
        s[1].type->set_peer(s[1].srv, s[0].type->reclaim_soon, s[0].srv);
    }
    sf_component_set_transports(self, transports);
    sf_component_set_ctx(self, r);
    return SF_OK;

out_free:
    servers_destroy(r);
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
    for (int i = 0; i < OTLP_SERVERS && st == SF_OK; i++)
        if (r->servers[i].srv != NULL)
            st = r->servers[i].type->start(r->servers[i].srv);
    return st;
}

/* HTTP first, then gRPC. */
static void otlp_shutdown(sf_component *self)
{
    otlp_receiver *r = sf_component_ctx(self);

    for (int i = OTLP_SERVERS - 1; i >= 0; i--)
        if (r->servers[i].srv != NULL)
            r->servers[i].type->shutdown(r->servers[i].srv);
}

static void otlp_destroy(sf_component *self)
{
    otlp_receiver *r = sf_component_ctx(self);

    if (r == NULL)
        return;
    servers_destroy(r);
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
    "again for the connection's decompression rate (decompression); and gRPC connections "
    "ended for their client's frames by an error GOAWAY or a fatal nghttp2 error "
    "(protocol_error): past 200 of those and calls reset with an error a second, server-wide, "
    "accepting pauses for 100 ms at a time and meanwhile a connection ends at its first such "
    "reset.\n"
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

/* The receiver's own series: what each server took back from requests in
 * progress and the connections it closed, evicted or refused, per reason
 * it applies; the clients' shares. */
static size_t otlp_metrics(sf_component *self, char *buf, size_t size)
{
    static const char *const reasons[SF_OTLP_RECLAIM_COUNT] = { "memory_short", "buffer_budget" };
    otlp_receiver *r = sf_component_ctx(self);
    const char *id = sf_component_id(self);
    size_t len = 0, share, clients, held;
    uint64_t n, bytes, refused;

    for (int k = 0; k < SF_OTLP_RECLAIM_COUNT; k++) {
        for (int i = 0; i < OTLP_SERVERS; i++) {
            const otlp_server *s = &r->servers[i];

            if (s->srv == NULL || !(s->type->reclaims & (1u << k)))
                continue;
            s->type->reclaimed(s->srv, (sf_otlp_reclaim)k, &n, &bytes);
            sf_metrics_put(buf, size, &len, "spanfence_receiver_reclaimed_requests{receiver=\"%s\","
                           "transport=\"%s\",reason=\"%s\"} %llu\n"
                           "spanfence_receiver_reclaimed_bytes{receiver=\"%s\",transport=\"%s\","
                           "reason=\"%s\"} %llu\n", id, s->type->label, reasons[k],
                           (unsigned long long)n, id, s->type->label, reasons[k],
                           (unsigned long long)bytes);
        }
    }
    for (int k = 0; k < SF_OTLP_CLOSE_COUNT; k++) {
        for (int i = 0; i < OTLP_SERVERS; i++) {
            const otlp_server *s = &r->servers[i];

            if (s->srv == NULL || !(s->type->closes & (1u << k)))
                continue;
            sf_metrics_put(buf, size, &len, "spanfence_receiver_closed_connections{receiver=\"%s\","
                           "transport=\"%s\",reason=\"%s\"} %llu\n", id, s->type->label,
                           sf_otlp_close_label((sf_otlp_close)k),
                           (unsigned long long)s->type->closed(s->srv, (sf_otlp_close)k));
        }
    }
    for (int i = 0; i < OTLP_SERVERS; i++) {
        const otlp_server *s = &r->servers[i];

        for (int over = 1; s->srv != NULL && over >= 0; over--)
            sf_metrics_put(buf, size, &len, "spanfence_receiver_reclaimed_share_requests{"
                           "receiver=\"%s\",transport=\"%s\",share=\"%s\"} %llu\n", id,
                           s->type->label, over ? "over" : "under",
                           (unsigned long long)sf_otlp_reclaimed_count(
                               r->clients, (unsigned)s->type->transport, over));
    }
    sf_otlp_share_state(r->clients, &share, &clients, &held);
    sf_metrics_put(buf, size, &len, "spanfence_receiver_memory_share_bytes{receiver=\"%s\"} %zu\n"
                   "spanfence_receiver_memory_clients{receiver=\"%s\"} %zu\n"
                   "spanfence_receiver_memory_held_bytes{receiver=\"%s\"} %zu\n", id, share, id,
                   clients, id, held);
    for (int i = 0; i < OTLP_SERVERS; i++) {
        const otlp_server *s = &r->servers[i];

        if (s->srv == NULL)
            continue;
        s->type->slots(s->srv, &n, &refused);
        sf_metrics_put(buf, size, &len, "spanfence_receiver_evicted_connections{receiver=\"%s\","
                       "transport=\"%s\"} %llu\n", id, s->type->label, (unsigned long long)n);
        if (s->type->refuses)
            sf_metrics_put(buf, size, &len, "spanfence_receiver_refused_connections{"
                           "receiver=\"%s\",transport=\"%s\"} %llu\n", id, s->type->label,
                           (unsigned long long)refused);
    }
    return len;
}

/* health_check: a server whose listener fails to accept (fds, memory). */
static bool otlp_unhealthy(sf_component *self, char *why, size_t size)
{
    otlp_receiver *r = sf_component_ctx(self);

    for (int i = 0; r != NULL && i < OTLP_SERVERS; i++) {
        const otlp_server *s = &r->servers[i];

        if (s->srv != NULL && s->type->accepting != NULL && !s->type->accepting(s->srv)) {
            snprintf(why, size, "%s cannot accept connections (out of file descriptors or "
                     "memory); retrying", s->type->name);
            return true;
        }
    }
    return false;
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

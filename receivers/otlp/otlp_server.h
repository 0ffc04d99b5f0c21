/* receivers/otlp/otlp_server.h: what the `otlp` receiver sees of each of
 * its two servers (OTLP/gRPC: h2_server.c, OTLP/HTTP: receiver_http.c):
 * one type of functions it drives both through, and the one vocabulary of
 * connection policies both count (otlp_limit.h's reasons), of which each
 * server says the part it applies. */
#ifndef SF_RECEIVERS_OTLP_SERVER_H
#define SF_RECEIVERS_OTLP_SERVER_H

#include "otlp.h"
#include "otlp_limit.h"

/* What the receiver hands each server at create; all of it outlives the
 * server. */
typedef struct otlp_server_env {
    sf_component *self;             /* the receiver: its id, emit, refuse */
    unsigned max_depth;             /* AnyValue nesting cap (max_value_depth) */
    sf_otlp_clients *clients;       /* both servers' table: shares, decompression per client */
} otlp_server_env;

typedef struct otlp_server_type {
    const char *name;               /* "OTLP/gRPC": for messages */
    sf_transport transport;
    const char *label;              /* the series' transport="..." */
    /* The part of the vocabulary it applies: the sf_otlp_reclaim reasons
     * it reclaims requests in progress for and the sf_otlp_close reasons
     * it closes connections for (bit 1u << reason each), and whether it
     * refuses newcomers when every slot is closing already. */
    unsigned reclaims;
    unsigned closes;
    bool refuses;
    /* Allocate for `config` (its protocol's section of the receiver's):
     * no threads, no socket. */
    sf_status (*create)(const otlp_server_env *env, const void *config, void **out);
    /* Bind and start serving. SF_IO when the address cannot be bound. */
    sf_status (*start)(void *srv);
    /* Stop accepting, let requests in progress finish (a grace period,
     * then close them), join the threads. Safe if never started. */
    void (*shutdown)(void *srv);
    /* Shut down and free; NULL is fine. */
    void (*destroy)(void *srv);
    /* Ask it to reclaim the requests in progress of clients over their
     * share now (while memory is short): the other server's requests
     * under their share may be the ones waiting. Never blocks. */
    void (*reclaim_soon)(void *srv);
    /* The other server's reclaim_soon, called when a request of a client
     * under its share finds memory short and this server has nothing left
     * to reclaim. */
    void (*set_peer)(void *srv, sf_otlp_reclaim_fn fn, void *peer);
    /* Its counts (spanfence_receiver_reclaimed_*, _closed_connections,
     * _evicted_connections, _refused_connections), 0 for a reason it does
     * not apply. Thread-safe. */
    void (*reclaimed)(const void *srv, sf_otlp_reclaim why, uint64_t *requests,
                      uint64_t *bytes);
    uint64_t (*closed)(const void *srv, sf_otlp_close why);
    void (*slots)(const void *srv, uint64_t *evicted, uint64_t *refused);
    /* False while accept() fails for want of fds or memory (retried with
     * backoff), for health reporting; NULL: a server that cannot say. */
    bool (*accepting)(const void *srv);
} otlp_server_type;

extern const otlp_server_type sf_otlp_grpc_server;     /* h2_server.c */
extern const otlp_server_type sf_otlp_http_server;     /* receiver_http.c */

#endif

/* receivers/otlp/h2_server.c: the event layer of the OTLP/gRPC server:
 * the listening socket, accept() and its backoff, the worker threads with
 * their epoll loops and eventfds (wake, poke), the connection caps (in all
 * and per peer address) and the receiver's lifecycle (create, start,
 * shutdown, destroy). It hands accepted sockets, readiness and ticks to the
 * HTTP/2 connection (h2_conn.h), and fills the table that connection calls
 * up through (h2_up) with its own functions and the gRPC call's. The
 * design is in receiver_grpc.c's head comment. */
#define _GNU_SOURCE                 /* accept4, sched_getaffinity, CPU_COUNT */
#include "grpc_call.h"
#include "h2_conn.h"
#include "sf_arena.h"
#include "sf_net.h"
#include "sf_time.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#define ARENA_CHUNK (1024 * 1024)
#define SHUTDOWN_GRACE_MS 5000
#define ACCEPT_BACKOFF_MIN_MS 50
#define ACCEPT_BACKOFF_MAX_MS 1000
#define ACCEPT_LOG_MS 10000
/* Connections ended and calls reset for their clients' frames (an HPACK
 * bomb, headers past the list size, a flood limit), server-wide: a burst,
 * then a rate a second; past it no worker accepts for CALM_MS. The
 * per-connection limits (h2_conn.c) close a connection, but a client
 * reconnecting at once gets a new connection's burst each time: 4
 * connections of HPACK bombs ended 1,800 a second (an accept, an nghttp2
 * session, a GOAWAY and a close, about 120 us each here), and headers
 * decoding to 3,000 fields (about 220 us a call) were reset 1,000 a second;
 * each took a quarter of a core. Clients that speak HTTP/2 never end so;
 * theirs wait in the backlog for at most CALM_MS meanwhile, and their open
 * connections are served. */
#define FAILED_BURST 200
#define FAILED_RATE 200
#define CALM_MS 100
/* Connections evicted for a newcomer past the caps, server-wide, paced the
 * same way. 560 clients each holding a partial message and reconnecting
 * at once when evicted (e2e/fair_slots_grpc) made 1,000 evictions a
 * second, each an accept, a read, our SETTINGS, an nghttp2 session made
 * and one deleted and a close, about 230 us: a quarter of a core. */
#define EVICTED_BURST 200
#define EVICTED_RATE 200
/* Buffered message bytes per worker when no memory_limiter runs. */
#define DEFAULT_BUDGET ((size_t)64 << 20)
#define PEER_BUCKETS 4096
/* What a connection is taken to cost (its nghttp2 session, measured about
 * 27 KiB counted), for the cap the memory limit puts on connections. */
#define CONN_COST ((size_t)32 * 1024)

static const char tag_listen, tag_wake, tag_poke;

/* ---- peers --------------------------------------------------------------------- */

static uint32_t peer_bucket_of(const struct sockaddr_storage *ss)
{
    const uint8_t *p;
    size_t n;
    uint32_t h = 2166136261u;

    if (ss->ss_family == AF_INET6) {
        p = ((const struct sockaddr_in6 *)ss)->sin6_addr.s6_addr;
        n = 16;
    } else {
        p = (const uint8_t *)&((const struct sockaddr_in *)ss)->sin_addr;
        n = 4;
    }
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 16777619u;
    return h % PEER_BUCKETS;
}

/* Take a place for a connection from `bucket`: false when a cap is full. */
static bool caps_take(sf_receiver_grpc *srv, uint32_t bucket, bool *peer_full)
{
    bool ok;

    pthread_mutex_lock(&srv->peer_lock);
    *peer_full = srv->peers[bucket] >= srv->cfg->max_connections_per_peer;
    ok = !*peer_full && atomic_load(&srv->n_conns) < srv->max_conns;
    if (ok) {
        srv->peers[bucket]++;
        atomic_fetch_add(&srv->n_conns, 1);
    }
    pthread_mutex_unlock(&srv->peer_lock);
    return ok;
}

static void caps_give(sf_receiver_grpc *srv, uint32_t bucket)
{
    pthread_mutex_lock(&srv->peer_lock);
    srv->peers[bucket]--;
    atomic_fetch_sub(&srv->n_conns, 1);
    pthread_mutex_unlock(&srv->peer_lock);
}

/* ---- accept -------------------------------------------------------------------- */

/* Ask the other workers to reclaim what they hold (or tell those with
 * parked calls that memory was freed). */
static void workers_poke(worker *self, bool parked_only)
{
    sf_receiver_grpc *srv = self->srv;
    uint64_t one = 1;

    for (unsigned i = 0; i < srv->n_workers; i++) {
        worker *w = &srv->workers[i];

        if (w == self || w->poke < 0 || (parked_only && atomic_load(&w->n_parked) == 0))
            continue;
        if (write(w->poke, &one, sizeof(one)) != sizeof(one)) {
            /* The counter is full: a poke is pending anyway. */
        }
    }
}

static void server_reclaim_soon(void *server)
{
    sf_receiver_grpc *srv = server;
    uint64_t one = 1;

    for (unsigned i = 0; i < srv->n_workers; i++) {
        atomic_store(&srv->workers[i].peer_asked, true);
        if (srv->workers[i].poke >= 0 && write(srv->workers[i].poke, &one, sizeof(one)) < 0) {
            /* The counter is full: a poke is pending anyway. */
        }
    }
}

static void server_set_peer(void *server, sf_otlp_reclaim_fn fn, void *peer)
{
    sf_receiver_grpc *srv = server;

    srv->peer_reclaim = fn;
    srv->peer = peer;
}

static void accept_pause(worker *w, int err)
{
    sf_receiver_grpc *srv = w->srv;
    h2_conn *idle = h2_conn_idlest(w, NULL);

    /* Logged once per episode, and episodes at most every ACCEPT_LOG_MS:
     * under a sustained attack accept() fails and succeeds by turns. */
    if (!atomic_exchange(&srv->accept_failing, true) && !atomic_load(&srv->accept_warned) &&
        sf_now_ms() - atomic_load(&srv->accept_warned_ms) >= ACCEPT_LOG_MS) {
        atomic_store(&srv->accept_warned_ms, sf_now_ms());
        atomic_store(&srv->accept_warned, true);
        sf_warn("receiver '%s': OTLP/gRPC cannot accept connections (%s): closing idle "
                "connections and retrying with backoff", sf_component_id(srv->env.self),
                strerror(err));
    }
    if (idle != NULL)
        h2_conn_close(idle);           /* frees an fd for the next try */
    w->accept_backoff_ms = w->accept_backoff_ms == 0 ? ACCEPT_BACKOFF_MIN_MS
                         : w->accept_backoff_ms * 2 > ACCEPT_BACKOFF_MAX_MS
                         ? ACCEPT_BACKOFF_MAX_MS : w->accept_backoff_ms * 2;
    w->accept_resume_ms = sf_now_ms() + w->accept_backoff_ms;
    if (w->listening) {
        epoll_ctl(w->ep, EPOLL_CTL_DEL, srv->lfd, NULL);
        w->listening = false;
    }
}

/* Take one from a server-wide pace; past it no worker accepts for
 * CALM_MS. true: past it (*say: the caller is to say why now). */
static bool pace_take(sf_receiver_grpc *srv, sf_otlp_bucket *b, int64_t rate, int64_t burst,
                      _Atomic int64_t *said_ms, bool *say)
{
    int64_t now = sf_now_ms();
    bool calm;

    pthread_mutex_lock(&srv->peer_lock);
    calm = !sf_otlp_bucket_take(b, 1, rate, burst, now);
    pthread_mutex_unlock(&srv->peer_lock);
    *say = calm && h2_say_due(said_ms, now);
    if (calm)
        atomic_store(&srv->calm_until_ms, now + CALM_MS);
    return calm;
}

/* h2_up.client_failed: a connection ended, or a call was reset, for its
 * client's frames. true: past the pace. */
static bool client_failed(worker *w)
{
    sf_receiver_grpc *srv = w->srv;
    bool say, calm = pace_take(srv, &srv->lim_failed, FAILED_RATE, FAILED_BURST,
                               &srv->calm_said_ms, &say);

    if (say)
        sf_warn("receiver '%s': OTLP/gRPC: more than %d connections or calls a second end "
                "for their clients' frames (protocol errors; "
                "spanfence_receiver_closed_connections): accepting pauses for %d ms at a time",
                sf_component_id(srv->env.self), FAILED_RATE, CALM_MS);
    return calm;
}

/* A connection was evicted for a newcomer past the caps. */
static void connection_evicted(worker *w)
{
    sf_receiver_grpc *srv = w->srv;
    bool say;

    atomic_fetch_add(&srv->evicted, 1);
    pace_take(srv, &srv->lim_evicted, EVICTED_RATE, EVICTED_BURST, &srv->evict_said_ms, &say);
    if (say)
        sf_warn("receiver '%s': OTLP/gRPC: more than %d connections a second give their "
                "place to newcomers past the connection caps "
                "(spanfence_receiver_evicted_connections): accepting pauses for %d ms at a time",
                sf_component_id(srv->env.self), EVICTED_RATE, CALM_MS);
}

static void worker_listen(worker *w, bool on)
{
    struct epoll_event ev = { .events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = (void *)&tag_listen };

    if (w->listening == on)
        return;
    if (on && epoll_ctl(w->ep, EPOLL_CTL_ADD, w->srv->lfd, &ev) != 0)
        return;
    if (!on)
        epoll_ctl(w->ep, EPOLL_CTL_DEL, w->srv->lfd, NULL);
    w->listening = on;
}

static void do_accept(worker *w)
{
    sf_receiver_grpc *srv = w->srv;
    int64_t calm_until = atomic_load(&srv->calm_until_ms);

    if (sf_now_ms() < calm_until) {
        /* the tick listens again once it is over */
        w->accept_resume_ms = calm_until;
        worker_listen(w, false);
        return;
    }

    for (int i = 0; i < 16; i++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        int fd = accept4(srv->lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        uint32_t bucket;
        bool peer_full;
        int one = 1;
        h2_conn *c;

        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOMEM || errno == ENOBUFS)
                accept_pause(w, errno);
            return;                 /* EAGAIN, or a connection that went away */
        }
        w->accept_backoff_ms = 0;
        if (atomic_exchange(&srv->accept_failing, false) && atomic_exchange(&srv->accept_warned, false))
            sf_info("receiver '%s': OTLP/gRPC accepting connections again",
                    sf_component_id(srv->env.self));
        bucket = peer_bucket_of(&ss);
        if (!caps_take(srv, bucket, &peer_full)) {
            /* Over a cap: the new connection takes the place of the
             * worker's connection making the least progress (calls held
             * open without progress, then handshakes, then idle ones),
             * if it has one. */
            h2_conn *idle = h2_conn_victim(w, NULL);

            if (idle != NULL) {
                h2_conn_close(idle);
                connection_evicted(w);
            }
            if (idle == NULL || !caps_take(srv, bucket, &peer_full)) {
                close(fd);
                continue;
            }
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        c = h2_conn_new(w, fd, bucket);
        if (c == NULL) {
            close(fd);
            caps_give(srv, bucket);
            continue;
        }
        c->client = sf_net_client_key((const struct sockaddr *)&ss);
        /* Our SETTINGS wait for the client's preface and go out with the
         * answer to it, one send() (RFC 9113 3.4: the client speaks
         * first), and what the client sent with its handshake is read now,
         * not after a trip through epoll: a client that never speaks
         * costs one recv() and no send. A flood of connections reconnecting
         * at once, each ended by its first frames (h2_abuse's hpack_bomb),
         * cost the collector a quarter of a core, a third of it in sends
         * and a sixth in epoll_wait. */
        if (!h2_conn_read(c) || !h2_conn_flush(c))
            h2_conn_close(c);
    }
}

/* ---- the event loop ------------------------------------------------------------ */

static void *worker_main(void *arg)
{
    worker *w = arg;
    int64_t next_tick = sf_now_ms() + TICK_MS;

    sf_buf_pool_use(true);
    for (;;) {
        struct epoll_event evs[64];
        int64_t now = sf_now_ms();
        int n = epoll_wait(w->ep, evs, 64, (int)(next_tick > now ? next_tick - now : 0));

        for (int i = 0; i < n; i++) {
            void *p = evs[i].data.ptr;

            if (p == &tag_listen) {
                if (!w->stopping)
                    do_accept(w);
                continue;
            }
            if (p == &tag_poke) {
                uint64_t v;
                ssize_t r = read(w->poke, &v, sizeof(v));

                (void)r;
                /* Asked by the HTTP server: clients over their share pay
                 * (its headroom below the soft limit counts too); by
                 * another worker: anyone, while memory is short. */
                if (atomic_exchange(&w->peer_asked, false) && h2_worker_reclaim_over(w) > 0)
                    workers_poke(w, true);
                if (!sf_component_may_accept(w->srv->env.self) && h2_worker_reclaim(w, NULL) > 0)
                    workers_poke(w, true);
                continue;
            }
            if (p == &tag_wake) {
                uint64_t v;
                ssize_t r = read(w->wake, &v, sizeof(v));

                (void)r;
                if (!w->stopping) {
                    w->stopping = true;
                    w->stop_deadline_ms = sf_now_ms() + SHUTDOWN_GRACE_MS;
                    worker_listen(w, false);
                    for (h2_conn *c = w->conns; c != NULL; c = c->next)
                        h2_conn_goaway(c, NGHTTP2_NO_ERROR);
                }
                continue;
            }
            {
                h2_conn *c = p;
                bool ok = true;

                if (c->dead)
                    continue;
                if (evs[i].events & (EPOLLERR | EPOLLHUP))
                    ok = (evs[i].events & EPOLLIN) != 0;
                if (ok && (evs[i].events & EPOLLOUT))
                    ok = h2_conn_flush(c);
                if (ok && (evs[i].events & EPOLLIN))
                    ok = h2_conn_read(c);
                if (ok)
                    ok = h2_conn_flush(c);
                if (!ok)
                    h2_conn_close(c);
            }
        }
        if (w->parked != NULL)
            h2_worker_retry_parked(w);
        now = sf_now_ms();
        if (now >= next_tick || w->stopping) {
            h2_worker_tick(w, now);
            next_tick = now + TICK_MS;
        }
        h2_worker_flush_dirty(w);
        h2_worker_bury(w);
        if (w->stopping && w->conns == NULL)
            break;
    }
    sf_buf_pool_use(false);
    return NULL;
}

/* ---- lifecycle ----------------------------------------------------------------- */

/* Most workers `workers: 0` gives. */
#define AUTO_WORKERS_MAX 8

/* The configured worker count, or for 0 the CPUs this process may run on. */
static unsigned worker_count(int64_t configured)
{
    cpu_set_t set;
    int n;

    if (configured > 0)
        return (unsigned)configured;
    if (sched_getaffinity(0, sizeof(set), &set) != 0)
        return 1;
    n = CPU_COUNT(&set);
    return n < 1 ? 1 : n > AUTO_WORKERS_MAX ? AUTO_WORKERS_MAX : (unsigned)n;
}

/* What the HTTP/2 connection calls up into: the gRPC call's functions and
 * this layer's. */
static const h2_up up = {
    .on_header = grpc_on_header,
    .on_data_chunk = grpc_on_data_chunk,
    .headers_done = grpc_stream_headers_done,
    .finish = grpc_stream_finish,
    .answer = grpc_stream_answer,
    .refuse = grpc_stream_refuse,
    .start_refusing = grpc_stream_start_refusing,
    .caps_give = caps_give,
    .workers_poke = workers_poke,
    .worker_listen = worker_listen,
    .client_failed = client_failed,
    .reclaim_soon = server_reclaim_soon,
};

static sf_status server_create(const otlp_server_env *env, const void *config, void **out)
{
    const sf_receiver_grpc_config *cfg = config;
    sf_receiver_grpc *srv = sf_calloc(1, sizeof(*srv));

    *out = NULL;
    if (srv == NULL)
        return SF_ENOMEM;
    srv->env = *env;
    srv->up = &up;
    srv->cfg = cfg;
    srv->max_msg = (size_t)cfg->max_recv_msg_size_mib * 1024 * 1024;
    srv->lfd = -1;
    srv->n_workers = worker_count(cfg->workers);
    srv->workers = sf_calloc(srv->n_workers, sizeof(*srv->workers));
    srv->peers = sf_calloc(PEER_BUCKETS, sizeof(*srv->peers));
    if (srv->workers == NULL || srv->peers == NULL) {
        sf_free(srv->workers);
        sf_free(srv->peers);
        sf_free(srv);
        return SF_ENOMEM;
    }
    for (unsigned i = 0; i < srv->n_workers; i++) {
        srv->workers[i].ep = -1;
        srv->workers[i].wake = -1;
        srv->workers[i].poke = -1;
    }
    pthread_mutex_init(&srv->peer_lock, NULL);
    sf_otlp_bucket_init(&srv->lim_failed, FAILED_BURST, sf_now_ms());
    sf_otlp_bucket_init(&srv->lim_evicted, EVICTED_BURST, sf_now_ms());
    srv->mem = (nghttp2_mem){ .mem_user_data = srv, .malloc = h2_mem_malloc, .free = h2_mem_free,
                              .calloc = h2_mem_calloc, .realloc = h2_mem_realloc };
    *out = srv;
    return SF_OK;
}

static sf_status open_listener(sf_receiver_grpc *srv)
{
    struct sockaddr_storage addr;
    socklen_t alen;
    int one = 1;

    if (sf_net_resolve(srv->cfg->endpoint, &addr, &alen) != SF_OK) {
        sf_error("receiver '%s': cannot listen for OTLP/gRPC on '%s' (invalid address)",
                 sf_component_id(srv->env.self), srv->cfg->endpoint);
        return SF_IO;
    }
    srv->lfd = socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (srv->lfd < 0 ||
        setsockopt(srv->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(srv->lfd, (struct sockaddr *)&addr, alen) != 0 || listen(srv->lfd, 1024) != 0) {
        char why[128];

        sf_error("receiver '%s': cannot listen for OTLP/gRPC on '%s': %s",
                 sf_component_id(srv->env.self), srv->cfg->endpoint,
                 sf_net_errno_text(errno, why, sizeof(why)));
        return SF_IO;
    }
    return SF_OK;
}

static sf_status server_start(void *server)
{
    sf_receiver_grpc *srv = server;
    size_t soft, hard;
    sf_status st;

    st = h2_setup_nghttp2(srv);
    if (st != SF_OK)
        return st;
    st = open_listener(srv);
    if (st != SF_OK)
        return st;
    /* What streams may buffer: a share of the hard limit (the rest is the
     * queue's and the batches'), split among the workers. */
    sf_alloc_limits(&soft, &hard);
    srv->budget = (hard > 0 ? hard / 4 : DEFAULT_BUDGET) / srv->n_workers;
    if (srv->budget < srv->max_msg)
        srv->budget = srv->max_msg;
    srv->max_conns = (unsigned)srv->cfg->max_connections;
    if (hard > 0 && hard / 4 / CONN_COST < srv->max_conns)
        srv->max_conns = hard / 4 / CONN_COST > 16 ? (unsigned)(hard / 4 / CONN_COST) : 16;
    for (unsigned i = 0; i < srv->n_workers; i++) {
        worker *w = &srv->workers[i];
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = (void *)&tag_wake };
        struct epoll_event pev = { .events = EPOLLIN, .data.ptr = (void *)&tag_poke };

        w->srv = srv;
        w->arena = sf_arena_create(ARENA_CHUNK, srv->max_msg * 16 + ARENA_CHUNK);
        w->ep = epoll_create1(EPOLL_CLOEXEC);
        w->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        w->poke = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (w->arena == NULL || w->ep < 0 || w->wake < 0 || w->poke < 0 ||
            epoll_ctl(w->ep, EPOLL_CTL_ADD, w->wake, &ev) != 0 ||
            epoll_ctl(w->ep, EPOLL_CTL_ADD, w->poke, &pev) != 0)
            return SF_ENOMEM;       /* shutdown() cleans up what exists */
        worker_listen(w, true);
        if (!w->listening)
            return SF_IO;
    }
    /* Threads once every worker's eventfds exist: a worker pokes others. */
    for (unsigned i = 0; i < srv->n_workers; i++) {
        worker *w = &srv->workers[i];

        if (pthread_create(&w->thread, NULL, worker_main, w) != 0)
            return SF_ENOMEM;
        w->running = true;
    }
    sf_info("receiver '%s': OTLP/gRPC listening on %s (nghttp2 %s; %u workers, %lld streams per "
            "connection, %lld connections, %lld per peer)", sf_component_id(srv->env.self),
            srv->cfg->endpoint, nghttp2_version(0)->version_str, srv->n_workers,
            (long long)srv->cfg->max_concurrent_streams, (long long)srv->max_conns,
            (long long)srv->cfg->max_connections_per_peer);
    return SF_OK;
}

static void server_shutdown(void *server)
{
    sf_receiver_grpc *srv = server;

    for (unsigned i = 0; i < srv->n_workers; i++) {
        worker *w = &srv->workers[i];
        uint64_t one = 1;

        if (w->running && write(w->wake, &one, sizeof(one)) != sizeof(one))
            sf_warn("receiver '%s': cannot wake a gRPC worker", sf_component_id(srv->env.self));
    }
    /* All joined before any fd closes: a worker may poke another's. */
    for (unsigned i = 0; i < srv->n_workers; i++) {
        worker *w = &srv->workers[i];

        if (w->running) {
            pthread_join(w->thread, NULL);
            w->running = false;
        }
    }
    for (unsigned i = 0; i < srv->n_workers; i++) {
        worker *w = &srv->workers[i];

        while (w->conns != NULL)
            h2_conn_close(w->conns);
        h2_worker_bury(w);
        if (w->ep >= 0)
            close(w->ep);
        if (w->wake >= 0)
            close(w->wake);
        if (w->poke >= 0)
            close(w->poke);
        w->ep = w->wake = w->poke = -1;
        w->listening = false;
    }
    if (srv->lfd >= 0) {
        close(srv->lfd);
        srv->lfd = -1;
    }
    if (srv->cbs != NULL) {
        nghttp2_session_callbacks_del(srv->cbs);
        srv->cbs = NULL;
    }
    if (srv->opt != NULL) {
        nghttp2_option_del(srv->opt);
        srv->opt = NULL;
    }
}

/* Partial messages are reclaimed when memory is short only: gRPC holds
 * no bodies' budget. */
static void server_reclaimed(const void *server, sf_otlp_reclaim why, uint64_t *calls,
                             uint64_t *bytes)
{
    sf_receiver_grpc *srv = (sf_receiver_grpc *)server;
    bool memory = why == SF_OTLP_RECLAIM_MEMORY;

    *calls = memory ? atomic_load(&srv->reclaimed_calls) : 0;
    *bytes = memory ? atomic_load(&srv->reclaimed_bytes) : 0;
}

/* gRPC refuses no newcomer outright: past the caps one takes a
 * connection's place or is closed (refused_connections is HTTP's). */
static void server_slots(const void *server, uint64_t *evicted, uint64_t *refused)
{
    *evicted = atomic_load(&((sf_receiver_grpc *)server)->evicted);
    *refused = 0;
}

static uint64_t server_closed(const void *server, sf_otlp_close why)
{
    return atomic_load(&((sf_receiver_grpc *)server)->closed[why]);
}

static bool server_accepting(const void *server)
{
    return !atomic_load(&((sf_receiver_grpc *)server)->accept_failing);
}

static void server_destroy(void *server)
{
    sf_receiver_grpc *srv = server;

    if (srv == NULL)
        return;
    server_shutdown(srv);
    for (unsigned i = 0; i < srv->n_workers; i++) {
        sf_arena_destroy(srv->workers[i].arena);
        while (srv->workers[i].n_spare > 0)
            sf_dynbuf_release(&srv->workers[i].spare[--srv->workers[i].n_spare]);
    }
    /* What its workers gave back to the pool of output buffers goes too
     * (the receiver of a reload fills it again). */
    sf_buf_pool_trim();
    pthread_mutex_destroy(&srv->peer_lock);
    sf_free(srv->peers);
    sf_free(srv->workers);
    sf_free(srv);
}

/* The frame floods are HTTP/2's; every close reason applies. */
const otlp_server_type sf_otlp_grpc_server = {
    .name = "OTLP/gRPC",
    .transport = SF_TRANSPORT_GRPC,
    .label = "grpc",
    .reclaims = 1u << SF_OTLP_RECLAIM_MEMORY,
    .closes = (1u << SF_OTLP_CLOSE_COUNT) - 1,
    .refuses = false,
    .create = server_create,
    .start = server_start,
    .shutdown = server_shutdown,
    .destroy = server_destroy,
    .reclaim_soon = server_reclaim_soon,
    .set_peer = server_set_peer,
    .reclaimed = server_reclaimed,
    .closed = server_closed,
    .slots = server_slots,
    .accepting = server_accepting,
};

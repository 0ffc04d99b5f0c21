/* receivers/otlp/h2_conn.c: the HTTP/2 connection of the OTLP/gRPC
 * server on libnghttp2: session setup and callbacks, stream state, the
 * flow-control windows and the worker's budget, the connection's output,
 * its timers (handshake, keepalive, idle, age, stalled answers and
 * output), and the reclaim of held partial messages when memory is short.
 * It calls up into the gRPC call when a stream's headers or message are
 * in, and into the event layer for connection caps and pokes, only through
 * the table the event layer filled (h2_up, h2_conn.h).
 * The design is in receiver_grpc.c's head comment. */
#include "h2_conn.h"
#include "otlp_answer.h"
#include "sf_time.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

/* Window a stream opens with (and keeps while its worker is over budget).
 * Large enough for an engine's usual call to arrive whole: with 64 KiB a
 * 100-span call (about 97 KB) waited for a WINDOW_UPDATE each time, one
 * more send, wake-up and read per call (engine benchmark: 4-10% more
 * collector CPU per call and a higher p50). gRPC core and grpc-go grow
 * their windows past this by BDP probing. */
#define STREAM_WINDOW (256 * 1024)
/* Connection window: returned at once, so large enough for many streams. */
#define CONN_WINDOW (4 * 1024 * 1024)
/* nghttp2 flood limits (CVE-2023-44487, CVE-2024-28182). A client that
 * cancels calls faster than this, sustained, gets GOAWAY. */
#define RST_BURST 200
#define RST_RATE 50
#define MAX_CONTINUATIONS 8
#define MAX_SETTINGS 32
#define MAX_OUTBOUND_ACK 100
/* A connection that has not sent its HTTP/2 preface by then is closed. */
#define HANDSHAKE_TIMEOUT_MS 10000
/* An answer not written by then is cancelled (RST_STREAM CANCEL). */
#define REPLY_TIMEOUT_MS 10000
/* Output that has not drained for this long closes the connection. */
#define WRITE_STALL_MS 20000
/* A call whose message makes no progress for this long is ended. */
#define STREAM_STALL_MS 30000
/* Reclaiming goes on until this share of the soft limit is free again
 * (1/RECLAIM_HEADROOM), so the next complete call finds room even while
 * the holders take back what they can. */
#define RECLAIM_HEADROOM 16
/* A reclaimed call whose client has sent nothing on the connection for
 * this long, with the window open and the connection read to its last
 * byte (client_stalled), is answered at once; others (waiting for our
 * window, a client busy with other streams, or a worker behind) are
 * counted from then on and answered UNAVAILABLE when complete, so a
 * client that goes on gets its answer and its spans are counted
 * (received = accepted + refused), or at a tick once their client
 * stalls. */
#define RECLAIM_STALL_MS 1000
/* What a worker reads from one connection before serving the others:
 * READS_PER_TURN reads of READ_CHUNK. A chunk holds a 100-span call
 * (about 97 KB) whole, so such a call costs one recv(), not two. */
#define READ_CHUNK (128 * 1024)
/* Frames are gathered for one send() while this much room is left. */
#define OUT_FRAME_MAX (16384 + 64)
#define READS_PER_TURN 2
/* Output a connection may have waiting (it is not read meanwhile). */
#define MAX_PENDING_OUT (1024 * 1024)
/* Pings a client may send too often before GOAWAY too_many_pings (gRPC's). */
#define MAX_PING_STRIKES 2
/* grpc/status.h's, which otlp_answer.h has no use for. */
#define RPC_DEADLINE_EXCEEDED 4
/* Frames that cost work and bring nothing, per connection: a burst, then a
 * rate a second; past it GOAWAY ENHANCE_YOUR_CALM (h2_conn_calm). Our
 * clients send few: a WINDOW_UPDATE now and then for five-byte answers, no
 * empty DATA without END_STREAM, no PRIORITY, no frame we must reset. Of
 * these nghttp2 1.52 limits only the client's own RST_STREAM (above);
 * floods of the rest cost 129-186 % CPU from four connections (issue 33).
 * Our resets count when they carry an error code (MadeYouReset's shapes,
 * CVE-2025-8671), not NO_ERROR after an early answer. */
#define LIM_WINDOW_UPDATE_BURST 1000
#define LIM_WINDOW_UPDATE_RATE 1000
#define LIM_EMPTY_DATA_BURST 100
#define LIM_EMPTY_DATA_RATE 100
#define LIM_PRIORITY_BURST 100
#define LIM_PRIORITY_RATE 100
#define LIM_RESETS_BURST 200
#define LIM_RESETS_RATE 50
/* Connections a newcomer past the caps looks at, the least progress
 * first, for one with no bytes waiting unread (an ioctl each). */
#define VICTIM_LOOK 8

/* ---- nghttp2's memory, counted ------------------------------------------------- */

void *h2_mem_malloc(size_t size, void *ud) { (void)ud; return sf_calloc_unlimited(1, size); }
void h2_mem_free(void *p, void *ud) { (void)ud; sf_free(p); }
void *h2_mem_calloc(size_t n, size_t size, void *ud)
{
    (void)ud;
    return sf_calloc_unlimited(n, size);
}
void *h2_mem_realloc(void *p, size_t size, void *ud)
{
    (void)ud;
    return sf_realloc_unlimited(p, size);
}

/* ---- streams ------------------------------------------------------------------- */

/* The gRPC call a stream belongs to (h2_up). */
static const h2_up *up_of(const h2_stream *s)
{
    return s->c->w->srv->up;
}

void h2_workers_poke_others(worker *self, bool parked_only)
{
    self->srv->up->workers_poke(self, parked_only);
}

static void deferred_unlink(worker *w, h2_stream *s)
{
    if (!s->deferred)
        return;
    if (s->prev != NULL)
        s->prev->next = s->next;
    else
        w->deferred = s->next;
    if (s->next != NULL)
        s->next->prev = s->prev;
    else
        w->deferred_tail = s->prev;
    s->prev = s->next = NULL;
    s->deferred = false;
}

void h2_stream_unpark(h2_stream *s)
{
    worker *w = s->c->w;

    if (!s->parked)
        return;
    if (s->pprev != NULL)
        s->pprev->pnext = s->pnext;
    else
        w->parked = s->pnext;
    if (s->pnext != NULL)
        s->pnext->pprev = s->pprev;
    s->pprev = s->pnext = NULL;
    s->parked = false;
    s->c->n_parked--;
    atomic_fetch_sub(&w->n_parked, 1);
}

void h2_stream_park(h2_stream *s)
{
    worker *w = s->c->w;

    if (s->parked)
        return;
    s->parked = true;
    s->c->n_parked++;
    s->pnext = w->parked;
    if (w->parked != NULL)
        w->parked->pprev = s;
    w->parked = s;
    atomic_fetch_add(&w->n_parked, 1);
}

static size_t stream_held(const h2_stream *s);
static size_t worker_reclaim(worker *w, const h2_stream *keep, bool keep_over,
                             bool (*wanted)(const worker *w, const h2_stream *keep));

/* What the stream holds, charged to its client's share (otlp_limit.h):
 * after anything that changes its buffer or whether it is partial. */
static void stream_hold(h2_stream *s)
{
    sf_otlp_hold_set(s->c->w->srv->env.clients, s->c->client, &s->hold, stream_held(s),
                     s->c->last_read_ms);
}

void h2_stream_drop_message(h2_stream *s)
{
    worker *w = s->c->w;

    /* Kept for the next call when small enough: a fresh buffer from 128 KiB
     * up is an mmap, paid a page fault per 4 KiB and a munmap per call
     * (measured: 4x the CPU per span of gRPC core's receiver without it). */
    if (s->msg.buf != NULL && sf_dynbuf_capacity(&s->msg) <= SPARE_MAX_BYTES &&
        w->n_spare < SPARES) {
        sf_dynbuf_reset(&s->msg);
        w->spare[w->n_spare++] = s->msg;
        sf_dynbuf_init(&s->msg, w->srv->max_msg);
    } else {
        sf_dynbuf_release(&s->msg);
    }
    if (s->reserved) {
        s->c->w->reserved -= s->msg_len;
        s->reserved = false;
    }
    stream_hold(s);
}

/* Whether a stream's whole message fits the worker's budget, or is the
 * only one (so one call always makes progress). */
static bool worker_budget_allows(const worker *w, const h2_stream *s)
{
    return w->reserved == 0 || w->reserved + s->msg_len <= w->srv->budget;
}

/* The largest message memory has room for now: false when it is short,
 * else *room is what a buffer may take without passing the soft limit
 * (every complete call would then wait for it). */
static bool memory_room(const worker *w, size_t *room)
{
    size_t soft, hard, in_use;

    if (!sf_component_may_accept(w->srv->env.self))
        return false;
    sf_alloc_limits(&soft, &hard);
    *room = SIZE_MAX;
    if (soft == 0)
        return true;
    in_use = sf_alloc_in_use();
    if (in_use >= soft)
        return false;
    *room = soft - in_use - 1;
    return true;
}

/* Whether memory has room for a stream's whole message. */
static bool memory_allows(const worker *w, const h2_stream *s)
{
    size_t room;

    return memory_room(w, &room) && s->msg_len <= room;
}

/* The largest message that may take its buffer now, for every waiting
 * stream at once: the worker's budget (worker_budget_allows) and memory
 * (memory_room); false when none may. */
static bool worker_room(const worker *w, size_t *room)
{
    size_t mem;

    if (w->reserved > w->srv->budget || !memory_room(w, &mem))
        return false;
    *room = w->reserved == 0 ? SIZE_MAX : w->srv->budget - w->reserved;
    if (mem < *room)
        *room = mem;
    return true;
}

/* Whether a stream may take its whole message's buffer now: the worker's
 * budget and memory allow it (the tick lets it go on once they do, or
 * refuses it while memory stays short). Streams that wait hold at most
 * their window, partly received. */
static bool budget_allows(const worker *w, const h2_stream *s)
{
    size_t room;

    return worker_room(w, &room) && s->msg_len <= room;
}

static void stream_free(h2_stream *s)
{
    h2_conn *c = s->c;

    if (s->cprev != NULL)
        s->cprev->cnext = s->cnext;
    else
        c->stream_list = s->cnext;
    if (s->cnext != NULL)
        s->cnext->cprev = s->cprev;
    c->streams--;
    deferred_unlink(c->w, s);
    h2_stream_unpark(s);
    h2_stream_drop_message(s);
    sf_count_inflate_release(&s->count);
    sf_free(s);
}

/* Frames of `c` are due that no event of its own may flush (a
 * WINDOW_UPDATE, an answer given on another connection's event). */
static void conn_mark_dirty(h2_conn *c)
{
    if (c->dirty)
        return;
    c->dirty = true;
    c->dirty_next = c->w->dirty;
    c->w->dirty = c;
}

static void stream_consume(h2_stream *s);
static void conn_stand(h2_conn *c);
static void conn_unstand(h2_conn *c);

/* Return what a stream has received to its window (budget permitting;
 * otherwise it waits on the worker's deferred list), and charge what it
 * holds now. */
void h2_stream_consume(h2_stream *s)
{
    stream_consume(s);
    stream_hold(s);
}

static void stream_consume(h2_stream *s)
{
    worker *w = s->c->w;

    if (s->unconsumed == 0)
        return;
    if (!s->answered && !s->refusing && !s->reserved && s->messages == 1 &&
        !budget_allows(w, s)) {
        if (!s->deferred) {
            s->deferred = true;
            s->prev = w->deferred_tail;
            if (w->deferred_tail != NULL)
                w->deferred_tail->next = s;
            else
                w->deferred = s;
            w->deferred_tail = s;
        }
        return;
    }
    deferred_unlink(w, s);
    conn_mark_dirty(s->c);
    if (!s->answered && !s->refusing && !s->reserved && s->messages == 1) {
        /* Within budget: the whole message's buffer, once. */
        if (sf_dynbuf_reserve(&s->msg, s->msg_len) == SF_OK) {
            s->reserved = true;
            w->reserved += s->msg_len;
            /* Its buffer is there: open the window to the whole message,
             * one WINDOW_UPDATE instead of one per 32 KiB. */
            if (s->msg_len > STREAM_WINDOW)
                nghttp2_session_set_local_window_size(s->c->ng, NGHTTP2_FLAG_NONE, s->id,
                                                      (int32_t)(s->msg_len + 5));
        } else {
            up_of(s)->start_refusing(s);
        }
    }
    nghttp2_session_consume_stream(s->c->ng, s->id, s->unconsumed);
    s->unconsumed = 0;
}

/* Budget freed: let waiting streams go on, the client holding least
 * first, the oldest first among its streams and equals: who holds least
 * is served first as who holds most pays first, so a client with one
 * large message waiting does not wait behind a flooder's hundreds of
 * streams, each admitted as another's buffer is freed (e2e/reclaim_share,
 * gRPC: 28 of 30 such calls, two past their 10 s deadline, when the
 * oldest went first). */
void h2_worker_undefer(worker *w)
{
    sf_otlp_clients *clients = w->srv->env.clients;

    for (;;) {
        h2_stream *pick = NULL;
        size_t least = SIZE_MAX, held = 0, room;
        const h2_conn *seen = NULL;

        if (w->deferred == NULL || !worker_room(w, &room))
            return;
        for (h2_stream *s = w->deferred; s != NULL && least > 0; s = s->next) {
            if (s->msg_len > room)
                continue;
            if (s->c != seen) {
                seen = s->c;
                held = pick == NULL && s->next == NULL ? 0 : sf_otlp_held(clients, s->c->client);
            }
            if (held < least) {
                pick = s;
                least = held;
            }
        }
        if (pick == NULL)
            return;
        deferred_unlink(w, pick);
        h2_stream_consume(pick);
    }
}

/* Whether reclaiming for a waiting stream should go on: until its
 * message fits, or it was admitted meanwhile (a victim's refusal lets
 * waiting streams go on). */
static bool room_wanted(const worker *w, const h2_stream *keep)
{
    return keep->deferred && !budget_allows(w, keep);
}

/* Whether a stream waiting for memory has waited long enough: at once
 * when its client is over its share (it never started waiting), after
 * DEFER_WAIT_MS when nobody is over theirs, and while a client over its
 * share still holds, after DEFER_WAIT_MAX_MS: that client's bytes are
 * being reclaimed for it, at the ticks of the workers and the HTTP server
 * that hold them, which a busy machine makes late (e2e/reclaim_share, gRPC:
 * the moderate client's calls were refused while the flooder held; this
 * is one of the two ways that could happen, and which one the failure
 * took is not known).
 * *any_over caches the answer of sf_otlp_any_over_share (-1: not asked). */
static bool wait_over(const worker *w, const h2_stream *s, int64_t now, int *any_over)
{
    int64_t waited = now - s->wait_since_ms;

    if (s->wait_since_ms == 0)
        return true;
    if (waited < DEFER_WAIT_MS)
        return false;
    if (waited >= DEFER_WAIT_MAX_MS)
        return true;
    if (*any_over < 0)
        *any_over = sf_otlp_any_over_share(w->srv->env.clients);
    return !*any_over;
}

/* At a tick, the waiting streams (undefer admitted those that fit). The
 * neediest of those of clients under their share asks for its message's
 * room (sf_otlp_want: clients holding more than it then will are over
 * their share) and the partial messages of clients over theirs in this
 * worker are reclaimed until it fits, whether the worker's budget or
 * memory is what it waits for; for memory, the other workers and the
 * HTTP server are asked too. A stream waiting for memory waits while
 * its client is under its share (wait_over), else not at all, and is then
 * refused (counted from now on, the window returned, answered
 * UNAVAILABLE when complete; counted as reclaimed when it held bytes)
 * rather than left waiting until STREAM_STALL_MS while memory stays
 * short. One waiting for the worker's budget waits on. */
static void worker_settle_deferred(worker *w, int64_t now)
{
    sf_otlp_clients *clients = w->srv->env.clients;
    h2_stream *neediest = NULL;
    size_t least = SIZE_MAX;
    int any_over = -1;

    for (h2_stream *s = w->deferred; s != NULL; s = s->next) {
        size_t held = stream_held(s), more = s->msg_len > held ? s->msg_len - held : 0;

        if (budget_allows(w, s) || !sf_otlp_want(clients, s->c->client, more, now))
            continue;
        if (s->wait_since_ms == 0 && worker_budget_allows(w, s))
            s->wait_since_ms = now;
        if (more < least) {
            neediest = s;
            least = more;
        }
    }
    if (neediest != NULL) {
        worker_reclaim(w, neediest, true, room_wanted);
        if (!memory_allows(w, neediest)) {
            w->srv->up->reclaim_soon(w->srv);
            if (w->srv->peer_reclaim != NULL)
                w->srv->peer_reclaim(w->srv->peer);
        }
        h2_worker_undefer(w);
    }
    for (;;) {
        h2_stream *s = w->deferred;
        size_t held;

        while (s != NULL && !(worker_budget_allows(w, s) && !memory_allows(w, s) &&
                              wait_over(w, s, now, &any_over)))
            s = s->next;
        if (s == NULL)
            return;
        held = stream_held(s);
        if (held > 0) {
            atomic_fetch_add(&w->srv->reclaimed_calls, 1);
            atomic_fetch_add(&w->srv->reclaimed_bytes, held);
            sf_otlp_reclaimed(clients, 0, sf_otlp_over_share(clients, s->c->client));
        }
        deferred_unlink(w, s);
        up_of(s)->start_refusing(s);
        h2_stream_consume(s);
    }
}

/* ---- reclaiming memory --------------------------------------------------------- */

/* The bytes a stream holds for a message that is not complete (its
 * buffer): what reclaiming it would give back. */
static size_t stream_held(const h2_stream *s)
{
    if (s->answered || s->refusing || s->parked || s->messages == 0 || s->msg_got >= s->msg_len)
        return 0;
    return sf_dynbuf_capacity(&s->msg);
}

/* Whether reclaiming should go on: memory short, or less than the
 * headroom free below the soft limit. */
static bool reclaim_wanted(const sf_receiver_grpc *srv)
{
    size_t soft, hard;

    if (!sf_component_may_accept(srv->env.self))
        return true;
    sf_alloc_limits(&soft, &hard);
    return soft > 0 && sf_alloc_in_use() + soft / RECLAIM_HEADROOM >= soft;
}

/* Memory is short, and a complete call would be refused for it: first
 * refuse (UNAVAILABLE) and free the partial messages this worker holds:
 * those of clients over their share of the held bytes first (otlp_limit.h),
 * and within that the most bytes with the least recent progress first
 * (bytes times the time since their last byte), until memory is no longer
 * short, with a headroom (RECLAIM_HEADROOM), or none is left.
 * `keep` (the stream asking) is never taken, and when its client is over
 * its share only clients over theirs pay for it. A client that stopped
 * sending (held windows, then silence), or that holds more than its share,
 * thus pays for the memory it holds, not every client whose call is
 * complete. Returns the bytes freed. */
static size_t worker_reclaim(worker *w, const h2_stream *keep, bool keep_over,
                             bool (*wanted)(const worker *w, const h2_stream *keep));

/* Reclaiming for memory: while memory is short, with the headroom. */
static bool memory_wanted(const worker *w, const h2_stream *keep)
{
    (void)keep;
    return reclaim_wanted(w->srv);
}


size_t h2_worker_reclaim(worker *w, const h2_stream *keep)
{
    return worker_reclaim(w, keep, keep != NULL &&
                          sf_otlp_over_share(w->srv->env.clients, keep->c->client), memory_wanted);
}

size_t h2_worker_reclaim_over(worker *w)
{
    return worker_reclaim(w, NULL, true, memory_wanted);
}

/* Whether the client of call `st` stalls: nothing read from its
 * connection for RECLAIM_STALL_MS though it could send (no output waiting
 * for it, the call's and the connection's windows open), and no byte of it
 * waiting unread on the socket. Otherwise the wait is ours: a closed
 * window, or a worker behind (it served other connections, or the machine
 * is busy); its call is then counted as the rest comes and answered when
 * complete, not ended as a crawler's. */
static bool client_stalled(const h2_stream *st, int64_t now)
{
    const h2_conn *c = st->c;
    int unread = 0;

    if (c->out_len > 0 || now - c->last_read_ms < RECLAIM_STALL_MS ||
        nghttp2_session_want_write(c->ng))
        return false;
    if (nghttp2_session_get_local_window_size(c->ng) <= 0 ||
        nghttp2_session_get_stream_local_window_size(c->ng, st->id) <= 0)
        return false;
    return !(ioctl(c->fd, FIONREAD, &unread) == 0 && unread > 0);
}

/* `keep_over`: clients over their share only; `wanted`: whether to go on. */
static size_t worker_reclaim(worker *w, const h2_stream *keep, bool keep_over,
                             bool (*wanted)(const worker *w, const h2_stream *keep))
{
    sf_receiver_grpc *srv = w->srv;
    int64_t now = sf_now_ms();
    size_t freed = 0;

    while (wanted(w, keep)) {
        h2_stream *victim = NULL;
        uint64_t best = 0;
        size_t held = 0;
        bool victim_over = false;

        for (h2_conn *c = w->conns; c != NULL; c = c->next) {
            int over = -1;          /* its client over its share: asked once, if it holds */

            for (h2_stream *st = c->stream_list; st != NULL; st = st->cnext) {
                size_t h = stream_held(st);
                uint64_t score;

                if (h == 0 || st == keep)
                    continue;
                if (over < 0)
                    over = sf_otlp_over_share(srv->env.clients, c->client);
                if (keep_over && !over)
                    continue;
                if (victim_over && !over)
                    continue;
                score = (uint64_t)h * (uint64_t)(now - st->progress_ms + TICK_MS);
                if (victim == NULL || (over && !victim_over) || score > best) {
                    victim = st;
                    best = score;
                    held = h;
                    victim_over = over;
                }
            }
        }
        if (victim == NULL)
            break;
        if (!victim_over && (srv->peer_reclaim != NULL || srv->n_workers > 1) &&
            sf_otlp_any_over_share(srv->env.clients)) {
            /* A client over its share holds elsewhere (another worker's,
             * the HTTP server's): it pays first, asked by its owner's tick
             * and pokes; the HTTP server is asked now. */
            if (srv->peer_reclaim != NULL)
                srv->peer_reclaim(srv->peer);
            break;
        }
        atomic_fetch_add(&srv->reclaimed_calls, 1);
        atomic_fetch_add(&srv->reclaimed_bytes, held);
        sf_otlp_reclaimed(srv->env.clients, 0, victim_over);
        freed += held;
        if (!victim->deferred && client_stalled(victim, now)) {
            /* Its client may send the rest no more: said, for the spans
             * it never sent are neither received nor counted. */
            if (h2_say_due(&srv->stalled_said_ms, now))
                sf_warn("receiver '%s': OTLP/gRPC: memory is short: ending calls whose clients "
                        "sent nothing for %d ms though they could (partial messages reclaimed, "
                        "their spans so far refused)", sf_component_id(srv->env.self),
                        RECLAIM_STALL_MS);
            up_of(victim)->start_refusing(victim);     /* its held spans counted */
            up_of(victim)->refuse(victim, SF_REASON_MEMORY_LIMIT, SF_RPC_UNAVAILABLE,
                          "memory is short: this call's partial message was reclaimed (no "
                          "recent progress); retry");
        } else {
            up_of(victim)->start_refusing(victim);
            h2_stream_consume(victim);     /* its window back: the rest is counted as it comes */
        }
        conn_mark_dirty(victim->c);
    }
    return freed;
}

/* ---- nghttp2 callbacks --------------------------------------------------------- */

static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
    h2_conn *c = ud;
    h2_stream *s;

    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    if (c->w->stopping)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    s = sf_calloc_unlimited(1, sizeof(*s));
    if (s == NULL)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    s->id = f->hd.stream_id;
    s->c = c;
    s->kind = KIND_OTHER;
    s->progress_ms = sf_now_ms();
    sf_dynbuf_init(&s->msg, c->w->srv->max_msg);
    nghttp2_session_set_stream_user_data(ng, s->id, s);
    s->cnext = c->stream_list;
    if (c->stream_list != NULL)
        c->stream_list->cprev = s;
    c->stream_list = s;
    c->streams++;
    c->calls++;
    if (c->streams == 1)
        conn_stand(c);
    return 0;
}

/* Take one from a flood bucket; past it the connection is closed. */
static void conn_limit(h2_conn *c, sf_otlp_bucket *b, int64_t burst, int64_t rate,
                       sf_otlp_close why)
{
    if (!sf_otlp_bucket_take(b, 1, rate, burst, c->last_read_ms))
        h2_conn_calm(c, why);
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
    h2_conn *c = ud;
    const sf_otlp_keepalive_enforcement *kp = &c->w->srv->cfg->keepalive.enforcement_policy;
    h2_stream *s;

    switch (f->hd.type) {
    case NGHTTP2_WINDOW_UPDATE:
        conn_limit(c, &c->lim_window_update, LIM_WINDOW_UPDATE_BURST, LIM_WINDOW_UPDATE_RATE,
                   SF_OTLP_CLOSE_WINDOW_UPDATE);
        return 0;
    case NGHTTP2_PRIORITY:
        conn_limit(c, &c->lim_priority, LIM_PRIORITY_BURST, LIM_PRIORITY_RATE,
                   SF_OTLP_CLOSE_PRIORITY);
        return 0;
    case NGHTTP2_SETTINGS:
        if (!c->preface) {
            c->preface = true;
            conn_stand(c);
        }
        return 0;
    case NGHTTP2_PING:
        if (f->hd.flags & NGHTTP2_FLAG_ACK) {
            c->ping_sent_ms = 0;
            return 0;
        }
        /* enforcement_policy, as gRPC: a ping sooner than min_time after the
         * last one, or with no call open unless permitted, is a strike. */
        if ((c->streams == 0 && !kp->permit_without_stream) ||
            (c->client_ping_ms != 0 && c->last_read_ms - c->client_ping_ms < kp->min_time))
            c->ping_strikes++;
        c->client_ping_ms = c->last_read_ms;
        if (c->ping_strikes > MAX_PING_STRIKES) {
            static const char debug[] = "too_many_pings";

            nghttp2_submit_goaway(ng, NGHTTP2_FLAG_NONE,
                                  nghttp2_session_get_last_proc_stream_id(ng),
                                  NGHTTP2_ENHANCE_YOUR_CALM, (const uint8_t *)debug,
                                  sizeof(debug) - 1);
            c->closing = true;
        }
        return 0;
    case NGHTTP2_HEADERS:
        s = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
        if (s == NULL)
            return 0;
        if (f->headers.cat == NGHTTP2_HCAT_REQUEST)
            up_of(s)->headers_done(s);
        if (f->hd.flags & NGHTTP2_FLAG_END_STREAM)
            up_of(s)->finish(s);
        return 0;
    case NGHTTP2_DATA:
        /* No payload (padding is not payload) and no END_STREAM: nothing. */
        if (f->hd.length <= f->data.padlen && !(f->hd.flags & NGHTTP2_FLAG_END_STREAM))
            conn_limit(c, &c->lim_empty_data, LIM_EMPTY_DATA_BURST, LIM_EMPTY_DATA_RATE,
                       SF_OTLP_CLOSE_EMPTY_DATA);
        s = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
        if (s != NULL && (f->hd.flags & NGHTTP2_FLAG_END_STREAM))
            up_of(s)->finish(s);
        return 0;
    default:
        return 0;
    }
}

/* Resets we send with an error code: the client's frames made them. A
 * GOAWAY with one ends the connection for them (nghttp2's checks of the
 * client's frames, our limits). */
static int on_frame_send(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
    h2_conn *c = ud;

    (void)ng;
    if (f->hd.type == NGHTTP2_RST_STREAM && f->rst_stream.error_code != NGHTTP2_NO_ERROR) {
        /* The server-wide pace too: a client reconnecting at once would
         * get a new connection's burst each time. Past it, the first such
         * reset ends the connection. */
        if (c->w->srv->up->client_failed(c->w))
            h2_conn_calm(c, SF_OTLP_CLOSE_RESETS);
        else
            conn_limit(c, &c->lim_resets, LIM_RESETS_BURST, LIM_RESETS_RATE,
                       SF_OTLP_CLOSE_RESETS);
    }
    if (f->hd.type == NGHTTP2_GOAWAY && f->goaway.error_code != NGHTTP2_NO_ERROR)
        c->failed = true;
    return 0;
}

static int on_stream_close(nghttp2_session *ng, int32_t id, uint32_t error_code, void *ud)
{
    h2_conn *c = ud;
    h2_stream *s = nghttp2_session_get_stream_user_data(ng, id);

    (void)error_code;
    if (s == NULL)
        return 0;
    nghttp2_session_set_stream_user_data(ng, id, NULL);
    stream_free(s);
    if (c->streams == 0) {
        c->idle_since_ms = sf_now_ms();
        conn_stand(c);
    }
    h2_worker_undefer(c->w);
    return 0;
}

/* ---- connections --------------------------------------------------------------- */

bool h2_say_due(_Atomic int64_t *said_ms, int64_t now_ms)
{
    int64_t last = atomic_load(said_ms);

    return now_ms - last >= H2_SAY_MS && atomic_compare_exchange_strong(said_ms, &last, now_ms);
}

/* Close now; the struct is freed at the end of the worker's turn (an event
 * of this turn may still point at it). */
void h2_conn_close(h2_conn *c)
{
    worker *w = c->w;

    if (c->dead)
        return;
    c->dead = true;
    if (c->failed || c->calmed) {
        if (!c->calmed)     /* a limit's closes are counted under its reason */
            atomic_fetch_add(&w->srv->closed[SF_OTLP_CLOSE_PROTOCOL], 1);
        w->srv->up->client_failed(w);
    }
    /* nghttp2_session_del does not call on_stream_close. */
    while (c->stream_list != NULL)
        stream_free(c->stream_list);
    nghttp2_session_del(c->ng);
    sf_dynbuf_release(&c->pend);
    epoll_ctl(w->ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    w->srv->up->caps_give(w->srv, c->peer_bucket);
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        w->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    conn_unstand(c);
    w->n_conns--;
    c->next = w->graveyard;
    w->graveyard = c;
    h2_worker_undefer(w);
}

/* Send what connections owe that no event of theirs will flush. */
void h2_worker_flush_dirty(worker *w)
{
    while (w->dirty != NULL) {
        h2_conn *c = w->dirty;

        w->dirty = c->dirty_next;
        c->dirty = false;
        if (!c->dead && !h2_conn_flush(c))
            h2_conn_close(c);
    }
}

void h2_worker_bury(worker *w)
{
    while (w->graveyard != NULL) {
        h2_conn *c = w->graveyard;

        w->graveyard = c->next;
        sf_free(c);
    }
}

static void conn_want_out(h2_conn *c, bool on)
{
    /* While output waits the connection is not read: EPOLLOUT only. */
    struct epoll_event ev = { .events = on ? EPOLLOUT : EPOLLIN, .data.ptr = c };

    if (c->want_out == on)
        return;
    c->want_out = on;
    epoll_ctl(c->w->ep, EPOLL_CTL_MOD, c->fd, &ev);
}

/* Write what nghttp2 has to send. false: the connection is to be closed. */
/* Keep output the socket did not take; c->out points at it. */
static bool conn_keep(h2_conn *c, const uint8_t *p, size_t n)
{
    if (n == 0)
        return true;
    if (sf_dynbuf_add(&c->pend, p, n) != SF_OK)
        return false;
    c->out = (const uint8_t *)sf_dynbuf_ptr(&c->pend);
    c->out_len = sf_dynbuf_len(&c->pend);
    c->out_since_ms = sf_now_ms();
    return true;
}

/* Write what nghttp2 has to send, its frames gathered into one send() (an
 * answer is three frames; a send each cost a wake-up each in the client),
 * keeping what the socket does not take. false: close the connection. */
bool h2_conn_flush(h2_conn *c)
{
    worker *w = c->w;

    for (;;) {
        const uint8_t *p = w->obuf;
        size_t n = 0;
        ssize_t k;

        if (c->out_len > 0) {
            p = c->out;
            n = c->out_len;
        } else {
            while (n + OUT_FRAME_MAX <= sizeof(w->obuf)) {
                const uint8_t *d;
                ssize_t m = nghttp2_session_mem_send(c->ng, &d);

                if (m < 0)
                    return false;
                if (m == 0)
                    break;
                if (n + (size_t)m > sizeof(w->obuf)) {     /* larger than any frame we send */
                    if (!conn_keep(c, w->obuf, n) || !conn_keep(c, d, (size_t)m))
                        return false;
                    break;
                }
                memcpy(w->obuf + n, d, (size_t)m);
                n += (size_t)m;
            }
            if (c->out_len > 0)
                continue;
            if (n == 0)
                break;
        }
        k = send(c->fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return false;
        if (k < 0)
            k = 0;
        if (p == w->obuf) {
            if ((size_t)k == n)
                continue;
            if (!conn_keep(c, w->obuf + k, n - (size_t)k))
                return false;
            conn_want_out(c, true);
            return true;
        }
        c->out += k;
        c->out_len -= (size_t)k;
        if (c->out_len == 0) {
            sf_dynbuf_release(&c->pend);
            continue;
        }
        conn_want_out(c, true);
        return true;
    }
    conn_want_out(c, false);
    if (c->closing)
        return false;
    return nghttp2_session_want_read(c->ng) || nghttp2_session_want_write(c->ng);
}

/* nghttp2 gave up on a connection (its flood limits, a callback's
 * failure): closed without a GOAWAY, so its calls in flight fail at the
 * client. Said at most once per H2_SAY_MS for the server. */
static void conn_fatal(h2_conn *c, int err)
{
    c->failed = true;
    if (h2_say_due(&c->w->srv->fatal_said_ms, sf_now_ms()))
        sf_warn("receiver '%s': OTLP/gRPC: closing a connection with %u calls open: nghttp2: %s",
                sf_component_id(c->w->srv->env.self), c->streams, nghttp2_strerror(err));
}

/* Read a bounded amount, then let the worker serve other connections.
 * false: the connection is to be closed. */
bool h2_conn_read(h2_conn *c)
{
    uint8_t buf[READ_CHUNK];
    ssize_t rv;

    if (c->out_len > 0)
        return true;                /* answers wait to be written: no more input */
    for (int i = 0; i < READS_PER_TURN; i++) {
        ssize_t n = recv(c->fd, buf, sizeof(buf), 0);

        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return true;
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        c->last_read_ms = sf_now_ms();
        if (c->streams > 0)
            conn_stand(c);
        rv = nghttp2_session_mem_recv(c->ng, buf, (size_t)n);
        if (rv < 0) {
            conn_fatal(c, (int)rv);
            return false;
        }
        if ((size_t)n < sizeof(buf) || c->closing)
            return true;
    }
    return true;
}

/* How far a connection is from making progress, for a newcomer past the
 * caps: 0 calls open (partial messages held, answers not read), 1 no
 * preface yet, 2 idle without a call yet, 3 idle between calls (a client
 * worth keeping); and within a rank, since when (the oldest first). */
static unsigned conn_rank(const h2_conn *c, int64_t *since)
{
    if (c->streams > 0) {
        *since = c->last_read_ms;
        return 0;
    }
    *since = c->preface ? c->idle_since_ms : c->opened_ms;
    return !c->preface ? 1 : c->calls == 0 ? 2 : 3;
}

static void conn_unstand(h2_conn *c)
{
    conn_order_remove(&c->w->ranks[c->rank], &c->rlink);
}

/* After what its rank or its time within it depends on changed (a read
 * with calls open, a call opened, the last one closed, the preface): its
 * place, found from the tail. Times only grow, so that is where it goes
 * but for a preface, whose rank counts from when the connection opened. */
static void conn_stand(h2_conn *c)
{
    int64_t since;

    if (c->dead)
        return;
    conn_unstand(c);
    c->rank = conn_rank(c, &since);
    conn_order_insert(&c->w->ranks[c->rank], &c->rlink, since);
}

/* The worker's connection with no call open to give up first: the least
 * worth keeping (no preface, then never a call, then between calls), idle
 * longest among those. */
h2_conn *h2_conn_idlest(worker *w, h2_conn *except)
{
    for (unsigned r = 1; r < H2_RANKS; r++)
        for (conn_link *l = w->ranks[r].head; l != NULL; l = l->next)
            if (CONN_ORDER_OF(l, h2_conn, rlink) != except)
                return CONN_ORDER_OF(l, h2_conn, rlink);
    return NULL;
}

h2_conn *h2_conn_victim(worker *w, h2_conn *except)
{
    unsigned passed = 0;

    for (unsigned r = 0; r < H2_RANKS; r++) {
        for (conn_link *l = w->ranks[r].head; l != NULL; l = l->next) {
            h2_conn *c = CONN_ORDER_OF(l, h2_conn, rlink);
            int waiting = 0;

            if (c == except || c->closing || c->n_parked > 0)
                continue;
            /* Bytes it sent wait unread: progress not seen yet (a client
             * whose call arrived whole with its connection). */
            if (ioctl(c->fd, FIONREAD, &waiting) != 0 || waiting == 0)
                return c;
            if (++passed == VICTIM_LOOK)
                return NULL;
        }
    }
    return NULL;
}

void h2_conn_goaway(h2_conn *c, uint32_t code)
{
    if (c->goaway)
        return;
    c->goaway = true;
    c->goaway_ms = sf_now_ms();
    nghttp2_submit_goaway(c->ng, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(c->ng),
                          code, NULL, 0);
}

void h2_conn_calm(h2_conn *c, sf_otlp_close why)
{
    const char *label = sf_otlp_close_label(why);

    if (c->calmed)
        return;
    c->calmed = true;
    c->goaway = true;
    c->goaway_ms = sf_now_ms();
    c->closing = true;
    atomic_fetch_add(&c->w->srv->closed[why], 1);
    nghttp2_submit_goaway(c->ng, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(c->ng),
                          NGHTTP2_ENHANCE_YOUR_CALM, (const uint8_t *)label, strlen(label));
    conn_mark_dirty(c);
    sf_debug("receiver '%s': OTLP/gRPC: closing a connection (%s)",
             sf_component_id(c->w->srv->env.self), label);
}

bool h2_conn_inflate_open(h2_conn *c, unsigned *slot)
{
    bool close;

    if (sf_otlp_inflate_open(c->w->srv->env.clients, c->client, c->opened_ms, sf_now_ms(), slot,
                             &close))
        return true;
    if (close)
        h2_conn_calm(c, SF_OTLP_CLOSE_DECOMPRESSION);
    return false;
}

h2_conn *h2_conn_new(worker *w, int fd, uint32_t bucket)
{
    sf_receiver_grpc *srv = w->srv;
    h2_conn *c = sf_calloc_unlimited(1, sizeof(*c));
    nghttp2_settings_entry iv[] = {
        { NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, (uint32_t)srv->cfg->max_concurrent_streams },
        { NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, STREAM_WINDOW },
        { NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, MAX_HEADER_LIST },
        { NGHTTP2_SETTINGS_ENABLE_PUSH, 0 },
    };
    struct epoll_event ev = { .events = EPOLLIN };

    if (c == NULL)
        return NULL;
    c->w = w;
    c->fd = fd;
    c->peer_bucket = bucket;
    c->opened_ms = c->idle_since_ms = c->last_read_ms = sf_now_ms();
    sf_otlp_bucket_init(&c->lim_window_update, LIM_WINDOW_UPDATE_BURST, c->opened_ms);
    sf_otlp_bucket_init(&c->lim_empty_data, LIM_EMPTY_DATA_BURST, c->opened_ms);
    sf_otlp_bucket_init(&c->lim_priority, LIM_PRIORITY_BURST, c->opened_ms);
    sf_otlp_bucket_init(&c->lim_resets, LIM_RESETS_BURST, c->opened_ms);
    sf_dynbuf_init(&c->pend, MAX_PENDING_OUT);
    if (nghttp2_session_server_new3(&c->ng, srv->cbs, c, srv->opt, &srv->mem) != 0) {
        sf_free(c);
        return NULL;
    }
    if (nghttp2_submit_settings(c->ng, NGHTTP2_FLAG_NONE, iv, sizeof(iv) / sizeof(iv[0])) != 0 ||
        nghttp2_session_set_local_window_size(c->ng, NGHTTP2_FLAG_NONE, 0, CONN_WINDOW) != 0) {
        nghttp2_session_del(c->ng);
        sf_free(c);
        return NULL;
    }
    ev.data.ptr = c;
    if (epoll_ctl(w->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
        nghttp2_session_del(c->ng);
        sf_free(c);
        return NULL;
    }
    c->next = w->conns;
    if (w->conns != NULL)
        w->conns->prev = c;
    w->conns = c;
    w->n_conns++;
    conn_stand(c);
    return c;
}

/* ---- timers -------------------------------------------------------------------- */

/* Complete calls that waited for memory: served now, parked again, or
 * refused once their PARK_MS is over. */
void h2_worker_retry_parked(worker *w)
{
    h2_stream *s = w->parked;

    w->parked = NULL;
    while (s != NULL) {
        h2_stream *next = s->pnext;

        s->parked = false;
        s->pprev = s->pnext = NULL;
        s->c->n_parked--;
        atomic_fetch_sub(&w->n_parked, 1);
        up_of(s)->finish(s);           /* may park it again, at the list's head */
        conn_mark_dirty(s->c);
        s = next;
    }
}

/* Timers: handshake, keepalive, idle, age, stalled answers and output. */
void h2_worker_tick(worker *w, int64_t now)
{
    const sf_otlp_keepalive_server *ka = &w->srv->cfg->keepalive.server_parameters;
    h2_conn *next;

    /* Idle output buffers are the first memory to give back, then the
     * partial messages held longest without progress. */
    if (sf_alloc_under_pressure())
        sf_buf_pool_trim();
    if (!sf_component_may_accept(w->srv->env.self) && h2_worker_reclaim(w, NULL) > 0)
        w->srv->up->workers_poke(w, true);
    /* Streams deferred while memory was short go on once it is not, or
     * are refused while it stays short. */
    h2_worker_undefer(w);
    worker_settle_deferred(w, now);
    if (!w->listening && !w->stopping && now >= w->accept_resume_ms) {
        w->srv->up->worker_listen(w, true);
        /* With no client waiting, no accept() would say the trouble is
         * over: an fd to spare says it. */
        if (atomic_load(&w->srv->accept_failing)) {
            int fd = dup(w->srv->lfd);

            if (fd >= 0) {
                close(fd);
                if (atomic_exchange(&w->srv->accept_failing, false) &&
                    atomic_exchange(&w->srv->accept_warned, false))
                    sf_info("receiver '%s': OTLP/gRPC accepting connections again",
                            sf_component_id(w->srv->env.self));
            }
        }
    }
    for (h2_conn *c = w->conns; c != NULL; c = next) {
        bool close_now = false;

        next = c->next;
        if (!c->preface && now - c->opened_ms >= HANDSHAKE_TIMEOUT_MS)
            close_now = true;
        if (c->out_len > 0 && now - c->out_since_ms >= WRITE_STALL_MS)
            close_now = true;
        if (c->ping_sent_ms != 0 && now - c->ping_sent_ms >= ka->timeout)
            close_now = true;
        if (c->goaway && ka->max_connection_age_grace > 0 && c->streams > 0 &&
            now - c->goaway_ms >= ka->max_connection_age_grace)
            close_now = true;
        if (c->goaway && c->streams == 0 && c->out_len == 0)
            close_now = true;
        if (w->stopping && now >= w->stop_deadline_ms)
            close_now = true;
        if (close_now) {
            h2_conn_close(c);
            continue;
        }
        if (ka->time > 0 && c->ping_sent_ms == 0 && c->preface && now - c->last_read_ms >= ka->time) {
            if (nghttp2_submit_ping(c->ng, NGHTTP2_FLAG_NONE, NULL) == 0)
                c->ping_sent_ms = now;
        }
        if (ka->max_connection_idle > 0 && c->streams == 0 &&
            now - c->idle_since_ms >= ka->max_connection_idle)
            h2_conn_goaway(c, NGHTTP2_NO_ERROR);
        if (ka->max_connection_age > 0 && now - c->opened_ms >= ka->max_connection_age)
            h2_conn_goaway(c, NGHTTP2_NO_ERROR);
        if (w->stopping)
            h2_conn_goaway(c, NGHTTP2_NO_ERROR);
        /* Calls: an answer the peer does not take, a deadline passed, a
         * message that stopped coming. */
        for (h2_stream *st = c->stream_list; st != NULL; st = st->cnext) {
            if (st->answered && now - st->progress_ms >= REPLY_TIMEOUT_MS)
                nghttp2_submit_rst_stream(c->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
            else if (!st->answered && st->deadline_ms != 0 && now >= st->deadline_ms)
                up_of(st)->answer(st, RPC_DEADLINE_EXCEEDED, "deadline exceeded");
            else if (!st->answered && st->refusing && client_stalled(st, now))
                up_of(st)->refuse(st, SF_REASON_MEMORY_LIMIT, SF_RPC_UNAVAILABLE,
                                  "memory is short: this call's message was refused and its "
                                  "client stopped sending; retry");
            else if (!st->answered && now - st->progress_ms >= STREAM_STALL_MS)
                up_of(st)->answer(st, SF_RPC_UNAVAILABLE, "request message stalled");
        }
        if (!h2_conn_flush(c))
            h2_conn_close(c);
    }
}

/* ---- setup --------------------------------------------------------------------- */

sf_status h2_setup_nghttp2(sf_receiver_grpc *srv)
{
    if (nghttp2_session_callbacks_new(&srv->cbs) != 0 || nghttp2_option_new(&srv->opt) != 0)
        return SF_ENOMEM;
    nghttp2_session_callbacks_set_on_begin_headers_callback(srv->cbs, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(srv->cbs, srv->up->on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(srv->cbs, srv->up->on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(srv->cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(srv->cbs, on_stream_close);
    nghttp2_session_callbacks_set_on_frame_send_callback(srv->cbs, on_frame_send);
    nghttp2_option_set_no_auto_window_update(srv->opt, 1);
    nghttp2_option_set_stream_reset_rate_limit(srv->opt, RST_BURST, RST_RATE);
    nghttp2_option_set_max_continuations(srv->opt, MAX_CONTINUATIONS);
    nghttp2_option_set_max_settings(srv->opt, MAX_SETTINGS);
    nghttp2_option_set_max_outbound_ack(srv->opt, MAX_OUTBOUND_ACK);
    /* Closed streams kept for priority bookkeeping cost memory per reset. */
    nghttp2_option_set_no_closed_streams(srv->opt, 1);
    nghttp2_option_set_max_deflate_dynamic_table_size(srv->opt, 256);
    return SF_OK;
}

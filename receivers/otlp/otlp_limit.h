/* receivers/otlp/otlp_limit.h: the `otlp` receiver's rate limits (a token
 * bucket: per connection for HTTP/2 frames, per client for decompression)
 * and the reasons a connection is closed for crossing one
 * (spanfence_receiver_closed_connections{reason}), shared by the gRPC and
 * HTTP servers. */
#ifndef SF_RECEIVERS_OTLP_LIMIT_H
#define SF_RECEIVERS_OTLP_LIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* X(ENUM, label): why a connection was closed for what it cost us. */
#define SF_OTLP_CLOSE_MAP(X)                        \
    X(WINDOW_UPDATE,  "window_update_flood")        \
    X(EMPTY_DATA,     "empty_data_flood")           \
    X(PRIORITY,       "priority_flood")             \
    X(RESETS,         "reset_flood")                \
    X(DECOMPRESSION,  "decompression")              \
    X(PROTOCOL,       "protocol_error")

typedef enum sf_otlp_close {
#define SF_OTLP_CLOSE_ENUM(e, label) SF_OTLP_CLOSE_##e,
    SF_OTLP_CLOSE_MAP(SF_OTLP_CLOSE_ENUM)
#undef SF_OTLP_CLOSE_ENUM
    SF_OTLP_CLOSE_COUNT
} sf_otlp_close;

/* The metric label of a close reason. */
const char *sf_otlp_close_label(sf_otlp_close why);

/* A token bucket: `rate` tokens a second, at most `burst` banked. Frames
 * take one each; decompression takes the bytes it produced, after the fact
 * (the balance may go negative: one message is always let through when
 * the bucket is not in debt, whatever its size). */
typedef struct sf_otlp_bucket {
    int64_t tokens;
    int64_t last_ms;
} sf_otlp_bucket;

/* Start full-ish: `tokens` banked as of `now_ms`. */
void sf_otlp_bucket_init(sf_otlp_bucket *b, int64_t tokens, int64_t now_ms);
/* Refill for the time since the last call, then take `n`. False when the
 * bucket had fewer than `n` (nothing is taken then). */
bool sf_otlp_bucket_take(sf_otlp_bucket *b, int64_t n, int64_t rate, int64_t burst,
                         int64_t now_ms);
/* Refill, then whether the balance is positive (work may start). */
bool sf_otlp_bucket_open(sf_otlp_bucket *b, int64_t rate, int64_t burst, int64_t now_ms);
/* Charge `n` done already: the balance may go negative, down to
 * -`debt_max` (the largest message, so one costs its whole size). */
void sf_otlp_bucket_charge(sf_otlp_bucket *b, int64_t n, int64_t debt_max);

/* Decompression, per client (sf_net_client_key: on loopback a connection,
 * elsewhere a peer address), across both servers: bytes inflated a second,
 * as much banked at most; a message goes through whenever the client's
 * balance is positive (a new client's first at once) and is charged after,
 * into debt. Zeros inflate at 250-500 MB/s a core: four connections of
 * bombs cost under a quarter of one (at 32 MiB/s each, 38-40 %); an
 * engine's calls (1 KB a span) reach the rate at 8,000 spans/s compressed,
 * and bursts bank up to SF_OTLP_INFLATE_BURST (a burst of the rate alone
 * refused the OpenTelemetry JS SDK's gzip batches in e2e/transports_matrix
 * in CI). Past SF_OTLP_INFLATE_STRIKES refusals, each within 1 s of the
 * last, the connection making the call is closed. */
#define SF_OTLP_INFLATE_RATE ((int64_t)8 << 20)
#define SF_OTLP_INFLATE_BURST ((int64_t)32 << 20)
#define SF_OTLP_INFLATE_STRIKES 8
/* Clients with an entry of their own; the rest share one (the overflow). */
#define SF_OTLP_CLIENT_SLOTS 256

/* The receiver's table of clients: one per `otlp` receiver, shared by its
 * gRPC workers and HTTP threads. A client's entry is reused for another
 * only when it owes nothing (not in debt, no inflate under way). */
typedef struct sf_otlp_clients sf_otlp_clients;

/* A table whose debts are bounded by `debt_max` bytes (the largest message
 * either server inflates; at least SF_OTLP_INFLATE_RATE). NULL on no
 * memory. */
sf_otlp_clients *sf_otlp_clients_create(size_t debt_max);
void sf_otlp_clients_destroy(sf_otlp_clients *t);     /* NULL ok */

/* Whether `client` may inflate a message now (its balance is positive).
 * A client new to the table has banked since `since_ms` (when the
 * connection it calls on opened), as a connection's own bucket would have.
 * On true, *slot names its entry for sf_otlp_inflate_charge, which must
 * follow. On false the refusal is a strike, and *close says whether the
 * client went on past SF_OTLP_INFLATE_STRIKES (close the connection; the
 * strikes start again). One lock. */
bool sf_otlp_inflate_open(sf_otlp_clients *t, uint64_t client, int64_t since_ms, int64_t now_ms,
                          unsigned *slot, bool *close);
/* Charge `n` bytes inflated to the entry sf_otlp_inflate_open gave (at
 * most debt_max; the balance may go down to -debt_max). No lock. */
void sf_otlp_inflate_charge(sf_otlp_clients *t, unsigned slot, size_t n);
/* Charge `n` bytes inflated without asking first (a refused message's
 * spans counted). One lock. */
void sf_otlp_inflate_charge_client(sf_otlp_clients *t, uint64_t client, size_t n, int64_t now_ms);

/* Shares of the memory the receivers hold for incomplete messages (gRPC
 * streams' message buffers, HTTP upload bodies), per client, across both
 * servers. A client's share of the held bytes is what they hold in all /
 * the clients holding, and never less than capacity /
 * SF_OTLP_SHARE_FLOOR_DIV (the soft memory limit's 32nd: 1.6 MiB of 64 MiB),
 * so a client holding a message or two of ordinary size is never over it,
 * however many small holders a flooder's connections make; no share (nobody
 * over) without a limit. When memory is short or the HTTP bodies' budget
 * is full, the servers reclaim from clients over their share first, and a
 * client over its share reclaims only from others over theirs (else it is
 * refused itself). Clients that find no entry of their own hold in the
 * shared overflow entry, which is then as one client. */
#define SF_OTLP_SHARE_FLOOR_DIV 32

/* What one message in progress holds, charged to its client's entry
 * (slot). Zeroed: nothing. */
typedef struct sf_otlp_hold {
    size_t bytes;
    unsigned slot;
} sf_otlp_hold;

/* The soft memory limit, whose SF_OTLP_SHARE_FLOOR_DIV-th is the least
 * share (0: no limit, no shares, nobody is over one). */
void sf_otlp_clients_set_capacity(sf_otlp_clients *t, size_t capacity);
/* `h` (a message of `client`) now holds `bytes`. No lock when unchanged. */
void sf_otlp_hold_set(sf_otlp_clients *t, uint64_t client, sf_otlp_hold *h, size_t bytes,
                      int64_t now_ms);
/* A client under its share that waits for `more` bytes (a message's
 * buffer, an upload's next bytes) memory has no room for asks that the
 * share be, for SF_OTLP_WANT_MS, no more than what it will hold then (its
 * held bytes + `more`, never below the floor): clients holding more are
 * then over their share, and pay first, in whichever server or worker
 * they hold. Without it, a flooder's connections that each hold about the
 * same (the share is their mean) are none of them over it, and a moderate
 * client's large message waited behind them or was refused
 * (e2e/reclaim_share). The lowest asked stands until it lapses. Returns
 * whether `client` is under its share (one over it asks nothing). One
 * lock. */
#define SF_OTLP_WANT_MS 1000
bool sf_otlp_want(sf_otlp_clients *t, uint64_t client, size_t more, int64_t now_ms);
/* Whether `client` holds more than its share now. One lock. */
bool sf_otlp_over_share(sf_otlp_clients *t, uint64_t client);
/* What `client` holds now. One lock. */
size_t sf_otlp_held(sf_otlp_clients *t, uint64_t client);
/* Whether any client holds more than its share now. One lock, a pass. */
bool sf_otlp_any_over_share(sf_otlp_clients *t);
/* Wait until a message gives back held bytes, or `until_ms` (monotonic,
 * sf_time.h) passes. */
void sf_otlp_wait_given(sf_otlp_clients *t, int64_t until_ms);
/* The gauges: each client's share in bytes, the clients holding bytes,
 * and the bytes held in all. */
void sf_otlp_share_state(sf_otlp_clients *t, size_t *share, size_t *clients, size_t *held);
/* Ask the receiver's other server to reclaim the partial messages of
 * clients over their share soon (while memory is short or less than the
 * headroom is free): the shares span both servers, so a client of one
 * under its share is not refused while a client of the other holds more
 * than its share. Never blocks. */
typedef void (*sf_otlp_reclaim_fn)(void *server);

/* A message of a client `over` its share, or not, was reclaimed, over
 * `transport` (0 gRPC, 1 HTTP); and how many so far
 * (spanfence_receiver_reclaimed_share_requests). Thread-safe. */
void sf_otlp_reclaimed(sf_otlp_clients *t, unsigned transport, bool over);
uint64_t sf_otlp_reclaimed_count(sf_otlp_clients *t, unsigned transport, bool over);

#endif

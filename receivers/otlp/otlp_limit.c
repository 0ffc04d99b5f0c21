/* receivers/otlp/otlp_limit.c: the token bucket of the `otlp` receiver's
 * per-connection rate limits, its table of clients (decompression per
 * client, and each client's share of the memory held for incomplete
 * messages), and the names of the reasons a connection is closed for
 * crossing one.
 *
 * DESIGN
 * The clients' table is open addressing over SF_OTLP_CLIENT_SLOTS entries
 * under one mutex: a client lives within CLIENT_PROBE entries of its hash,
 * so a call looks at no more than that many, whatever the table holds. A
 * newcomer that finds no free entry there takes the one seen least
 * recently that owes nothing (an owing entry handed to another client
 * would forgive its debt); when all of them owe, it shares the overflow
 * entry with every other such client. Decompression is asked under the
 * lock (sf_otlp_inflate_open) and charged after without it: the balance is
 * an atomic that the refill updates by compare-and-swap, and an entry with
 * an inflate under way is never handed on. Held bytes (the shares) are
 * charged under the lock, and an entry holding any is not handed on
 * either, so a message gives back to the entry it charged (its slot); the
 * totals make a share one division, a client's standing one probe. */
#include "otlp_limit.h"
#include "sf_alloc.h"
#include "sf_time.h"

#include <pthread.h>
#include <stdatomic.h>

/* Entries a client may live in, from its hash on. */
#define CLIENT_PROBE 16
/* A new client's balance: its first messages at once, whatever their size
 * (the first is charged into debt), and a few small ones that come in the
 * same millisecond as its connection (an SDK's concurrent batches on a
 * fresh connection: with one byte, the second was refused in
 * e2e/transports_matrix now and then). */
#define INFLATE_FIRST (SF_OTLP_INFLATE_RATE / 8)

typedef struct client_entry {
    uint64_t key;               /* 0: free. Under mu */
    int64_t seen_ms;            /* last looked up. Under mu */
    /* decompression */
    _Atomic int64_t tokens;     /* the balance, charged without mu */
    int64_t last_ms;            /* refilled as of. Under mu */
    bool banked;                /* last_ms set by its first inflate (a connection's opening) */
    _Atomic unsigned inflating; /* opened, not yet charged */
    unsigned strikes;           /* refusals, each within 1 s of the last. Under mu */
    int64_t strike_ms;
    size_t held;                /* bytes of its incomplete messages. Under mu */
} client_entry;

struct sf_otlp_clients {
    pthread_mutex_t mu;
    pthread_cond_t given;       /* held bytes given back, while waiters > 0 */
    unsigned waiters;           /* in sf_otlp_wait_given. Under mu */
    int64_t debt_max;
    size_t capacity;            /* the soft limit, the shares' floor; 0: no shares. Under mu */
    size_t held, n_holding;     /* in all, and the entries holding bytes. Under mu */
    size_t want;                /* the share a waiting client asked for (sf_otlp_want). Under mu */
    int64_t want_until_ms;      /* ... until then */
    _Atomic uint64_t reclaimed[2][2];   /* [transport][over its share] */
    client_entry e[SF_OTLP_CLIENT_SLOTS + 1];   /* the last: the overflow */
};

const char *sf_otlp_close_label(sf_otlp_close why)
{
    static const char *const labels[SF_OTLP_CLOSE_COUNT] = {
#define SF_OTLP_CLOSE_LABEL(e, label) [SF_OTLP_CLOSE_##e] = label,
        SF_OTLP_CLOSE_MAP(SF_OTLP_CLOSE_LABEL)
#undef SF_OTLP_CLOSE_LABEL
    };

    return (unsigned)why < SF_OTLP_CLOSE_COUNT ? labels[why] : "unknown";
}

void sf_otlp_bucket_init(sf_otlp_bucket *b, int64_t tokens, int64_t now_ms)
{
    b->tokens = tokens;
    b->last_ms = now_ms;
}

/* The whole tokens `rate` a second adds between *last_ms and `now_ms`,
 * at most `burst`; *last_ms moves on by the time they took (so a stream
 * of calls 1 ms apart still refills: the remainder's time is kept), or to
 * now when the burst is reached. */
static int64_t refill_add(int64_t *last_ms, int64_t rate, int64_t burst, int64_t now_ms)
{
    int64_t dt = now_ms - *last_ms, add;

    if (dt <= 0)
        return 0;
    if (rate > 0 && dt > INT64_MAX / rate)
        dt = INT64_MAX / rate;
    add = dt * rate / 1000;
    if (add > 0)
        *last_ms = add >= burst ? now_ms : *last_ms + add * 1000 / rate;
    return add;
}

static void bucket_refill(sf_otlp_bucket *b, int64_t rate, int64_t burst, int64_t now_ms)
{
    int64_t add = refill_add(&b->last_ms, rate, burst, now_ms);

    if (add > 0)
        b->tokens = b->tokens > burst - add ? burst : b->tokens + add;
}

bool sf_otlp_bucket_take(sf_otlp_bucket *b, int64_t n, int64_t rate, int64_t burst,
                         int64_t now_ms)
{
    bucket_refill(b, rate, burst, now_ms);
    if (b->tokens < n)
        return false;
    b->tokens -= n;
    return true;
}

bool sf_otlp_bucket_open(sf_otlp_bucket *b, int64_t rate, int64_t burst, int64_t now_ms)
{
    bucket_refill(b, rate, burst, now_ms);
    return b->tokens > 0;
}

void sf_otlp_bucket_charge(sf_otlp_bucket *b, int64_t n, int64_t debt_max)
{
    b->tokens = b->tokens - n < -debt_max ? -debt_max : b->tokens - n;
}

/* ---- the clients' table ------------------------------------------------------ */

sf_otlp_clients *sf_otlp_clients_create(size_t debt_max)
{
    sf_otlp_clients *t = sf_calloc(1, sizeof(*t));

    if (t == NULL)
        return NULL;
    if (pthread_mutex_init(&t->mu, NULL) != 0) {
        sf_free(t);
        return NULL;
    }
    if (sf_cond_init(&t->given) != 0) {
        pthread_mutex_destroy(&t->mu);
        sf_free(t);
        return NULL;
    }
    t->debt_max = (int64_t)debt_max > SF_OTLP_INFLATE_RATE ? (int64_t)debt_max
                                                            : SF_OTLP_INFLATE_RATE;
    t->e[SF_OTLP_CLIENT_SLOTS].key = 1;     /* never free */
    atomic_store(&t->e[SF_OTLP_CLIENT_SLOTS].tokens, INFLATE_FIRST);
    return t;
}

void sf_otlp_clients_destroy(sf_otlp_clients *t)
{
    if (t == NULL)
        return;
    pthread_cond_destroy(&t->given);
    pthread_mutex_destroy(&t->mu);
    sf_free(t);
}

/* What `e`'s balance would be after a refill at `now` (not stored). */
static int64_t entry_balance(const client_entry *e, int64_t now)
{
    int64_t dt = now - e->last_ms, tokens = atomic_load(&e->tokens);

    if (dt <= 0)
        return tokens;
    if (dt > SF_OTLP_INFLATE_BURST * 2 / SF_OTLP_INFLATE_RATE * 1000)
        return SF_OTLP_INFLATE_BURST;
    return tokens + dt * SF_OTLP_INFLATE_RATE / 1000;
}

/* Refill `e`'s balance for the time since the last refill, as
 * bucket_refill does a bucket's, clamping a debt charged past debt_max
 * (the balance is charged without mu: stored by compare-and-swap). Under
 * mu. */
static void entry_refill(client_entry *e, int64_t debt_max, int64_t now)
{
    int64_t add = refill_add(&e->last_ms, SF_OTLP_INFLATE_RATE, SF_OTLP_INFLATE_BURST, now);
    int64_t old = atomic_load(&e->tokens), nw;

    do {
        int64_t b = old < -debt_max ? -debt_max : old;

        nw = b > SF_OTLP_INFLATE_BURST - add ? SF_OTLP_INFLATE_BURST : b + add;
    } while (nw != old && !atomic_compare_exchange_weak(&e->tokens, &old, nw));
}

/* Whether `e` may be handed to another client: it owes nothing and holds
 * nothing (what it holds is given back to it). */
static bool entry_owes_nothing(const client_entry *e, int64_t now)
{
    return e->held == 0 && atomic_load(&e->inflating) == 0 && entry_balance(e, now) > 0;
}

static void entry_take(client_entry *e, uint64_t key, int64_t now)
{
    e->key = key;
    e->last_ms = now;
    e->banked = false;
    atomic_store(&e->tokens, INFLATE_FIRST);
    e->strikes = 0;
    e->strike_ms = 0;
}

/* The entry of `key`, taken for it when it has none: within CLIENT_PROBE
 * of its hash, a free one or the least recently seen one that owes
 * nothing; else the overflow. Under mu. */
static client_entry *entry_of(sf_otlp_clients *t, uint64_t key, int64_t now)
{
    size_t home = (size_t)(key ^ key >> 32);
    client_entry *spare = NULL, *e = &t->e[SF_OTLP_CLIENT_SLOTS];

    if (key == 0)
        return e;                   /* no client: the overflow */
    for (size_t i = 0; i < CLIENT_PROBE; i++) {
        client_entry *c = &t->e[(home + i) % SF_OTLP_CLIENT_SLOTS];

        if (c->key == key) {
            c->seen_ms = now;
            return c;
        }
        if (c->key == 0) {
            spare = c;              /* none is freed: `key` is not further on */
            break;
        }
        if ((spare == NULL || (spare->key != 0 && c->seen_ms < spare->seen_ms)) &&
                   entry_owes_nothing(c, now)) {
            spare = c;
        }
    }
    if (spare != NULL) {
        entry_take(spare, key, now);
        e = spare;
    }
    e->seen_ms = now;
    return e;
}

static unsigned entry_slot(const sf_otlp_clients *t, const client_entry *e)
{
    return (unsigned)(e - t->e);
}

/* Charge `n` to `e`, within the bound. */
static void entry_charge(const sf_otlp_clients *t, client_entry *e, size_t n)
{
    int64_t c = n > (size_t)t->debt_max ? t->debt_max : (int64_t)n;
    int64_t old = atomic_fetch_sub(&e->tokens, c) - c;

    while (old < -t->debt_max &&
           !atomic_compare_exchange_weak(&e->tokens, &old, -t->debt_max))
        ;
}

bool sf_otlp_inflate_open(sf_otlp_clients *t, uint64_t client, int64_t since_ms, int64_t now_ms,
                          unsigned *slot, bool *close)
{
    client_entry *e;
    bool ok;

    *close = false;
    pthread_mutex_lock(&t->mu);
    e = entry_of(t, client, now_ms);
    if (!e->banked) {
        /* its first inflate (the entry may be older: what it holds was
         * charged first): banked since its connection opened */
        e->banked = true;
        if (since_ms < now_ms && atomic_load(&e->tokens) == INFLATE_FIRST)
            e->last_ms = since_ms;
    }
    entry_refill(e, t->debt_max, now_ms);
    ok = atomic_load(&e->tokens) > 0;
    if (ok) {
        atomic_fetch_add(&e->inflating, 1);
        *slot = entry_slot(t, e);
    } else {
        if (now_ms - e->strike_ms > 1000)
            e->strikes = 0;
        e->strike_ms = now_ms;
        if (++e->strikes > SF_OTLP_INFLATE_STRIKES) {
            *close = true;
            e->strikes = 0;
        }
    }
    pthread_mutex_unlock(&t->mu);
    return ok;
}

void sf_otlp_inflate_charge(sf_otlp_clients *t, unsigned slot, size_t n)
{
    client_entry *e = &t->e[slot];

    entry_charge(t, e, n);
    atomic_fetch_sub(&e->inflating, 1);
}

void sf_otlp_inflate_charge_client(sf_otlp_clients *t, uint64_t client, size_t n, int64_t now_ms)
{
    client_entry *e;

    pthread_mutex_lock(&t->mu);
    e = entry_of(t, client, now_ms);
    e->banked = true;
    entry_refill(e, t->debt_max, now_ms);       /* what it banked until now is its own */
    entry_charge(t, e, n);
    pthread_mutex_unlock(&t->mu);
}

/* ---- shares of held memory ----------------------------------------------------- */

void sf_otlp_clients_set_capacity(sf_otlp_clients *t, size_t capacity)
{
    pthread_mutex_lock(&t->mu);
    t->capacity = capacity;
    pthread_mutex_unlock(&t->mu);
}

void sf_otlp_hold_set(sf_otlp_clients *t, uint64_t client, sf_otlp_hold *h, size_t bytes,
                      int64_t now_ms)
{
    client_entry *e;

    if (bytes == h->bytes)
        return;
    pthread_mutex_lock(&t->mu);
    if (h->bytes > 0) {
        e = &t->e[h->slot];         /* held: the same entry (not handed on) */
    } else {
        e = entry_of(t, client, now_ms);
        h->slot = entry_slot(t, e);
    }
    if (e->held == 0)
        t->n_holding++;
    e->held = e->held - h->bytes + bytes;
    t->held = t->held - h->bytes + bytes;
    if (e->held == 0)
        t->n_holding--;
    if (bytes < h->bytes && t->waiters > 0)
        pthread_cond_broadcast(&t->given);
    h->bytes = bytes;
    pthread_mutex_unlock(&t->mu);
}

/* Each holding client's share of the held bytes: an equal part of them,
 * lowered to what a waiting client asked for (sf_otlp_want) while it
 * waits, never below the floor. Under mu. */
static size_t share_of(const sf_otlp_clients *t, int64_t now)
{
    size_t fair, floor;

    if (t->capacity == 0)
        return SIZE_MAX;
    fair = t->n_holding > 0 ? t->held / t->n_holding : 0;
    floor = t->capacity / SF_OTLP_SHARE_FLOOR_DIV;
    if (now < t->want_until_ms && t->want < fair)
        fair = t->want;
    return fair > floor ? fair : floor;
}

/* The entry `client` holds in (the overflow entry when it has none of its
 * own), for reading. Under mu. */
static const client_entry *entry_held_by(const sf_otlp_clients *t, uint64_t client)
{
    size_t home = (size_t)(client ^ client >> 32);

    if (client != 0) {
        for (size_t i = 0; i < CLIENT_PROBE; i++) {
            const client_entry *c = &t->e[(home + i) % SF_OTLP_CLIENT_SLOTS];

            if (c->key == client || c->key == 0)
                return c;
        }
    }
    return &t->e[SF_OTLP_CLIENT_SLOTS];
}

bool sf_otlp_over_share(sf_otlp_clients *t, uint64_t client)
{
    bool over;

    pthread_mutex_lock(&t->mu);
    over = entry_held_by(t, client)->held > share_of(t, sf_now_ms());
    pthread_mutex_unlock(&t->mu);
    return over;
}

size_t sf_otlp_held(sf_otlp_clients *t, uint64_t client)
{
    size_t held;

    pthread_mutex_lock(&t->mu);
    held = entry_held_by(t, client)->held;
    pthread_mutex_unlock(&t->mu);
    return held;
}

bool sf_otlp_any_over_share(sf_otlp_clients *t)
{
    bool any = false;
    int64_t now = sf_now_ms();
    size_t share;

    pthread_mutex_lock(&t->mu);
    share = share_of(t, now);
    for (size_t i = 0; i <= SF_OTLP_CLIENT_SLOTS && !any; i++)
        any = t->e[i].held > share;
    pthread_mutex_unlock(&t->mu);
    return any;
}

bool sf_otlp_want(sf_otlp_clients *t, uint64_t client, size_t more, int64_t now_ms)
{
    bool under;

    pthread_mutex_lock(&t->mu);
    {
        size_t held = entry_held_by(t, client)->held;
        size_t want = held + more;

        under = held <= share_of(t, now_ms);
        if (under && t->capacity > 0 && (now_ms >= t->want_until_ms || want < t->want)) {
            t->want = want;
            t->want_until_ms = now_ms + SF_OTLP_WANT_MS;
        } else if (under && want == t->want) {
            t->want_until_ms = now_ms + SF_OTLP_WANT_MS;
        }
    }
    pthread_mutex_unlock(&t->mu);
    return under;
}

void sf_otlp_wait_given(sf_otlp_clients *t, int64_t until_ms)
{
    pthread_mutex_lock(&t->mu);
    t->waiters++;
    (void)sf_cond_wait_until(&t->given, &t->mu, until_ms);
    t->waiters--;
    pthread_mutex_unlock(&t->mu);
}

void sf_otlp_share_state(sf_otlp_clients *t, size_t *share, size_t *clients, size_t *held)
{
    pthread_mutex_lock(&t->mu);
    *share = t->capacity == 0 ? 0 : share_of(t, sf_now_ms());
    *clients = t->n_holding;
    *held = t->held;
    pthread_mutex_unlock(&t->mu);
}

void sf_otlp_reclaimed(sf_otlp_clients *t, unsigned transport, bool over)
{
    atomic_fetch_add(&t->reclaimed[transport & 1][over], 1);
}

uint64_t sf_otlp_reclaimed_count(sf_otlp_clients *t, unsigned transport, bool over)
{
    return atomic_load(&t->reclaimed[transport & 1][over]);
}

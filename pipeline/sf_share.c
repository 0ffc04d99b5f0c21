/* sf_share.c: fair shares of a bounded resource between clients (sf_share.h).
 *
 * DESIGN
 * A fixed table of SF_SHARE_SLOTS entries under one mutex, scanned whole on
 * each call: a sending queue sees at most a few thousand calls a second and
 * a scan of 256 entries is well under a microsecond, which a hash table
 * would save only by being harder to keep exact. An entry is the client's
 * key, the units it holds and when it last called; it is reused once it
 * holds nothing and has been idle SF_SHARE_IDLE_MS, never while it holds
 * units, so what is charged to a key is given back to the same entry. */
#include "sf_share.h"
#include "sf_alloc.h"
#include "sf_time.h"

#include <pthread.h>

typedef struct share_entry {
    uint64_t client;            /* 0: free */
    size_t held;
    int64_t last_ms;
} share_entry;

struct sf_share {
    pthread_mutex_t mu;
    size_t capacity;
    size_t reserve;             /* the resource's room past capacity now (sf_share_set_reserve) */
    share_entry e[SF_SHARE_SLOTS];
};

sf_share *sf_share_create(size_t capacity)
{
    sf_share *sh;

    if (capacity == 0)
        return NULL;
    sh = sf_calloc(1, sizeof(*sh));
    if (sh == NULL)
        return NULL;
    if (pthread_mutex_init(&sh->mu, NULL) != 0) {
        sf_free(sh);
        return NULL;
    }
    sh->capacity = capacity;
    return sh;
}

void sf_share_destroy(sf_share *sh)
{
    if (sh == NULL)
        return;
    pthread_mutex_destroy(&sh->mu);
    sf_free(sh);
}

static bool active(const share_entry *e, int64_t now)
{
    return e->client != 0 && (e->held > 0 || now - e->last_ms < SF_SHARE_IDLE_MS);
}

/* One pass: the entry of `client` (or NULL), the entry a newcomer takes
 * (a free or idle one, else the least recently seen one holding nothing,
 * else NULL), and the clients active now. Under mu. */
static share_entry *scan(sf_share *sh, uint64_t client, int64_t now, share_entry **spare,
                         size_t *n_active)
{
    share_entry *found = NULL, *idle = NULL, *oldest = NULL;

    *n_active = 0;
    for (size_t i = 0; i < SF_SHARE_SLOTS; i++) {
        share_entry *e = &sh->e[i];

        if (e->client == client && client != 0)
            found = e;
        if (active(e, now))
            (*n_active)++;
        else if (idle == NULL)
            idle = e;           /* inactive: holds nothing */
        if (e->held == 0 && e->client != client && (oldest == NULL || e->last_ms < oldest->last_ms))
            oldest = e;
    }
    *spare = idle != NULL ? idle : oldest;
    return found;
}

/* What the resource can hold now: its capacity and the room granted past
 * it. Under mu. */
static size_t room_of(const sf_share *sh)
{
    return sh->capacity + sh->reserve;
}

/* Each active client's share, with `n` of them. Under mu. */
static size_t fair_of(const sf_share *sh, size_t n)
{
    size_t fair = room_of(sh) / (n > 0 ? n : 1);
    size_t floor = room_of(sh) / SF_SHARE_FLOOR_DIV;

    return fair > floor ? fair : floor > 0 ? floor : 1;
}

/* What the active clients other than `self` hold in all, how many they are,
 * and the room owed to those of them that hold less than their share (a
 * moderate client: an engine beside a flooder): each one's share less what
 * it holds. Not only to those under half their share: an engine holds its
 * rate times the queue's delay, which a flooder keeping the queue full
 * makes capacity / drain, so at half it would be owed room only while the
 * drain is over four times its rate (e2e/fair_queue: drained 67 k spans/s
 * on a loaded machine, the 20 k spans/s engine lost 3.5 % of its calls);
 * at its whole share, while the drain is over twice its rate, which is
 * what a fair split between two clients can carry. Under mu. */
typedef struct others {
    size_t held, n, owed;
} others;

static others others_of(const sf_share *sh, const share_entry *self, size_t fair, int64_t now)
{
    others o = { 0, 0, 0 };

    for (size_t i = 0; i < SF_SHARE_SLOTS; i++) {
        const share_entry *e = &sh->e[i];

        if (e == self || !active(e, now))
            continue;
        o.held += e->held;
        o.n++;
        if (e->held < fair)
            o.owed += fair - e->held;
    }
    return o;
}

/* Whether `e` adding `size` units to a resource holding `used` passes its
 * share where it matters: it holds some already, more than its share
 * after, more than twice what the others hold on average (a flooder, not
 * one of several clients of equal rates a batch or two ahead of the rest:
 * eight equal connections on a queue of 32, a share of 4, were refused a
 * call now and then at a queue a slow consumer kept over half full), and
 * what it adds eats into the room owed to moderate clients. Under mu. */
static bool passes_share(const sf_share *sh, const share_entry *e, size_t size, size_t used,
                         size_t n, int64_t now)
{
    size_t fair = fair_of(sh, n);
    others o;

    if (fair < SF_SHARE_MIN || e->held == 0 || e->held + size <= fair)
        return false;
    o = others_of(sh, e, fair, now);
    if (o.n > 0 && (e->held + size) * o.n <= 2 * o.held)
        return false;
    return used + size + o.owed > room_of(sh);
}

/* The client's entry, or the spare one a newcomer takes; NULL when the
 * table is full of clients holding units. *n: the active clients, one more
 * for a newcomer unless it takes the entry of one still counted. Under
 * sh->mu. */
static share_entry *entry_for(sf_share *sh, uint64_t client, int64_t now, size_t *n)
{
    share_entry *spare;
    share_entry *e = scan(sh, client, now, &spare, n);

    if (e == NULL && spare != NULL) {
        if (!active(spare, now))
            (*n)++;
        e = spare;
        e->client = client;
        e->held = 0;
    }
    return e;
}

bool sf_share_take(sf_share *sh, uint64_t client, size_t size, size_t used)
{
    bool pressed;
    int64_t now;
    share_entry *e;
    size_t n;
    bool ok = true;

    if (sh == NULL || client == 0)
        return true;
    now = sf_now_ms();
    pthread_mutex_lock(&sh->mu);
    pressed = used + size > room_of(sh) / 2;
    e = entry_for(sh, client, now, &n);
    if (e == NULL) {
        ok = !pressed;          /* the table is full of clients holding units */
    } else {
        e->last_ms = now;
        if (pressed && passes_share(sh, e, size, used, n, now))
            ok = false;
        else
            e->held += size;
    }
    pthread_mutex_unlock(&sh->mu);
    return ok;
}

bool sf_share_over(sf_share *sh, uint64_t client, size_t used)
{
    share_entry *e, *spare;
    int64_t now;
    size_t n;
    bool over;

    if (sh == NULL || client == 0)
        return false;
    now = sf_now_ms();
    pthread_mutex_lock(&sh->mu);
    e = used + 1 > room_of(sh) / 2 ? scan(sh, client, now, &spare, &n) : NULL;
    over = e != NULL && passes_share(sh, e, 1, used, n, now);
    pthread_mutex_unlock(&sh->mu);
    return over;
}

void sf_share_set_reserve(sf_share *sh, size_t reserve)
{
    if (sh == NULL)
        return;
    pthread_mutex_lock(&sh->mu);
    sh->reserve = reserve <= SIZE_MAX - sh->capacity ? reserve : SIZE_MAX - sh->capacity;
    pthread_mutex_unlock(&sh->mu);
}

void sf_share_charge(sf_share *sh, uint64_t client, size_t size)
{
    share_entry *e;
    int64_t now;
    size_t n;

    if (sh == NULL || client == 0)
        return;
    now = sf_now_ms();
    pthread_mutex_lock(&sh->mu);
    e = entry_for(sh, client, now, &n);
    if (e != NULL) {
        e->held += size;
        e->last_ms = now;
    }
    pthread_mutex_unlock(&sh->mu);
}

void sf_share_give(sf_share *sh, uint64_t client, size_t size)
{
    if (sh == NULL || client == 0)
        return;
    pthread_mutex_lock(&sh->mu);
    for (size_t i = 0; i < SF_SHARE_SLOTS; i++) {
        share_entry *e = &sh->e[i];

        if (e->client == client) {
            /* uncharged units (admitted while the table was full) give
             * back nothing they did not take */
            e->held = e->held > size ? e->held - size : 0;
            break;
        }
    }
    pthread_mutex_unlock(&sh->mu);
}

size_t sf_share_clients(sf_share *sh)
{
    int64_t now = sf_now_ms();
    size_t n = 0;

    pthread_mutex_lock(&sh->mu);
    for (size_t i = 0; i < SF_SHARE_SLOTS; i++)
        n += active(&sh->e[i], now);
    pthread_mutex_unlock(&sh->mu);
    return n;
}

size_t sf_share_fair(sf_share *sh)
{
    size_t n = sf_share_clients(sh), fair;

    pthread_mutex_lock(&sh->mu);
    fair = fair_of(sh, n);
    pthread_mutex_unlock(&sh->mu);
    return fair;
}

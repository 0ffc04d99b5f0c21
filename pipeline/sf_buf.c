/* sf_buf.c: reference-counted immutable bytes, and the pool of warm
 * buffers for the codec's output (sf_buf.h). */
#include "sf_buf.h"
#include "sf_alloc.h"

#include <pthread.h>
#include <string.h>

sf_buf *sf_buf_create(size_t len)
{
    sf_buf *b;

    if (len > SIZE_MAX - sizeof(*b))
        return NULL;
    b = sf_malloc(sizeof(*b) + len);
    if (b == NULL)
        return NULL;
    atomic_init(&b->refs, 1);
    b->pooled = false;
    b->len = len;
    b->cap = len;
    b->spans = 0;
    b->client = 0;
    return b;
}

sf_buf *sf_buf_ref(sf_buf *b)
{
    atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
    return b;
}

static void pool_put(sf_buf *b);

void sf_buf_unref(sf_buf *b)
{
    if (b != NULL && atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1) {
        if (b->pooled)
            pool_put(b);
        else
            sf_free(b);
    }
}

/* ---- the pool of warm buffers ------------------------------------------------ */

/* Smaller buffers come from malloc's heap (under its mmap threshold), where
 * a freed block is reused warm anyway. */
#define POOL_MIN ((size_t)64 * 1024)
/* A pooled buffer's capacity is rounded up to this, and one is taken for a
 * request of up to a quarter less (and this) than it holds. */
#define POOL_STEP ((size_t)16 * 1024)
#define POOL_IDLE_MAX 16
/* The most idle bytes: a share of the hard limit, or this without one. */
#define POOL_SHARE 16
#define POOL_DEFAULT_BYTES ((size_t)8 << 20)

static struct {
    pthread_mutex_t mu;
    sf_buf *idle[POOL_IDLE_MAX];    /* oldest first */
    unsigned n;
    size_t bytes;
} pool = { .mu = PTHREAD_MUTEX_INITIALIZER };

static _Thread_local bool pool_user;

void sf_buf_pool_use(bool on)
{
    pool_user = on;
}

static size_t pool_max_bytes(void)
{
    size_t soft, hard;

    sf_alloc_limits(&soft, &hard);
    return hard > 0 ? hard / POOL_SHARE : POOL_DEFAULT_BYTES;
}

/* Take idle[i] out of the pool (under the lock). */
static sf_buf *pool_remove(unsigned i)
{
    sf_buf *b = pool.idle[i];

    pool.bytes -= b->cap;
    memmove(&pool.idle[i], &pool.idle[i + 1], (pool.n - i - 1) * sizeof(pool.idle[0]));
    pool.n--;
    return b;
}

static void pool_put(sf_buf *b)
{
    sf_buf *evicted[POOL_IDLE_MAX];
    unsigned n_evicted = 0;
    size_t max = pool_max_bytes();

    if (b->cap > max || sf_alloc_under_pressure()) {
        sf_free(b);
        return;
    }
    /* The most recently given back are kept: they fit the calls now. */
    pthread_mutex_lock(&pool.mu);
    while (pool.n == POOL_IDLE_MAX || pool.bytes + b->cap > max)
        evicted[n_evicted++] = pool_remove(0);
    pool.idle[pool.n++] = b;
    pool.bytes += b->cap;
    pthread_mutex_unlock(&pool.mu);
    while (n_evicted > 0)
        sf_free(evicted[--n_evicted]);
}

void sf_buf_pool_trim(void)
{
    sf_buf *evicted[POOL_IDLE_MAX];
    unsigned n_evicted = 0;

    pthread_mutex_lock(&pool.mu);
    while (pool.n > 0)
        evicted[n_evicted++] = pool_remove(pool.n - 1);
    pthread_mutex_unlock(&pool.mu);
    while (n_evicted > 0)
        sf_free(evicted[--n_evicted]);
}

size_t sf_buf_pool_idle_bytes(void)
{
    size_t n;

    pthread_mutex_lock(&pool.mu);
    n = pool.bytes;
    pthread_mutex_unlock(&pool.mu);
    return n;
}

sf_buf *sf_buf_take(size_t len)
{
    sf_buf *b = NULL;
    unsigned fit = POOL_IDLE_MAX;
    size_t cap;

    if (!pool_user || len < POOL_MIN || len > SIZE_MAX / 2)
        return sf_buf_create(len);
    cap = (len + POOL_STEP - 1) / POOL_STEP * POOL_STEP;
    /* The smallest idle buffer that holds len without holding much more;
     * of equals, the most recently given back (its pages may be cached). */
    pthread_mutex_lock(&pool.mu);
    for (unsigned i = 0; i < pool.n; i++) {
        size_t c = pool.idle[i]->cap;

        if (c >= len && c <= cap + len / 4 && (fit == POOL_IDLE_MAX || c <= pool.idle[fit]->cap))
            fit = i;
    }
    if (fit < POOL_IDLE_MAX)
        b = pool_remove(fit);
    pthread_mutex_unlock(&pool.mu);
    if (b == NULL) {
        b = sf_buf_create(cap);
        if (b == NULL)
            return NULL;
        b->pooled = true;
    }
    atomic_store_explicit(&b->refs, 1, memory_order_relaxed);
    b->len = len;
    b->spans = 0;
    b->client = 0;
    return b;
}

sf_buf *sf_buf_resize(sf_buf *b, size_t used, size_t cap)
{
    sf_buf *n;

    if (cap > SIZE_MAX / 2)
        return NULL;
    if (!b->pooled) {
        n = sf_realloc(b, sizeof(*b) + cap);
        if (n != NULL)
            n->cap = cap;
        return n;
    }
    /* Pooled: within a quarter it stays; else a fitting one, from the pool
     * too, and this one goes back to it for the next call. */
    if (cap <= b->cap && cap >= b->cap - b->cap / 4)
        return b;
    n = sf_buf_take(cap);
    if (n == NULL)
        return NULL;
    memcpy(n->data, b->data, used < cap ? used : cap);
    n->len = b->len;
    n->spans = b->spans;
    n->client = b->client;
    sf_buf_unref(b);
    return n;
}

/* sf_alloc.c: counted allocation with a failure-injection hook for tests.
 *
 * DESIGN: a 16-byte header before each block holds its size, so frees can be
 * counted without a lookup. The counters are relaxed atomics: exact totals,
 * no ordering guarantees needed. Hot paths (decode, filter) allocate from
 * arenas (sf_arena.h), which call this once per chunk, not per object. */
#include "sf_alloc.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define SF_ALLOC_HDR 16

static _Atomic size_t in_use;
static _Atomic uint64_t count;     /* allocations since the last fail_at */
static _Atomic uint64_t fail_nth;  /* 0 = off */
static _Atomic int fail_sticky;
static _Atomic size_t limit_soft;
static _Atomic size_t limit_hard;
static _Atomic int external_pressure;

static int over_hard(size_t size)
{
    size_t hard = atomic_load_explicit(&limit_hard, memory_order_relaxed);

    return hard != 0 && atomic_load_explicit(&in_use, memory_order_relaxed) + size > hard;
}

static int should_fail(void)
{
    uint64_t n = atomic_fetch_add_explicit(&count, 1, memory_order_relaxed) + 1;
    uint64_t f = atomic_load_explicit(&fail_nth, memory_order_relaxed);

    if (f == 0)
        return 0;
    return n == f || (n > f && atomic_load_explicit(&fail_sticky, memory_order_relaxed));
}

static void account(size_t add, size_t sub)
{
    if (add)
        atomic_fetch_add_explicit(&in_use, add, memory_order_relaxed);
    if (sub)
        atomic_fetch_sub_explicit(&in_use, sub, memory_order_relaxed);
}

void *sf_malloc(size_t size)
{
    unsigned char *p;

    if (size > SIZE_MAX - SF_ALLOC_HDR || should_fail() || over_hard(size))
        return NULL;
    p = malloc(size + SF_ALLOC_HDR);
    if (p == NULL)
        return NULL;
    memcpy(p, &size, sizeof(size));
    account(size, 0);
    return p + SF_ALLOC_HDR;
}

void *sf_calloc(size_t n, size_t size)
{
    void *p;

    if (size != 0 && n > SIZE_MAX / size)
        return NULL;
    p = sf_malloc(n * size);
    if (p != NULL)
        memset(p, 0, n * size);
    return p;
}

void *sf_calloc_unlimited(size_t n, size_t size)
{
    unsigned char *p;
    size_t total;

    if (size != 0 && n > SIZE_MAX / size)
        return NULL;
    total = n * size;
    if (total > SIZE_MAX - SF_ALLOC_HDR || should_fail())
        return NULL;
    p = calloc(1, total + SF_ALLOC_HDR);
    if (p == NULL)
        return NULL;
    memcpy(p, &total, sizeof(total));
    account(total, 0);
    return p + SF_ALLOC_HDR;
}

/* sf_realloc and sf_realloc_unlimited: `limited` refuses growth past the
 * hard limit. */
static void *realloc_counted(void *ptr, size_t size, int limited)
{
    unsigned char *base, *np;
    size_t old;

    if (ptr == NULL)
        return limited ? sf_malloc(size) : sf_calloc_unlimited(1, size);
    if (size > SIZE_MAX - SF_ALLOC_HDR || should_fail())
        return NULL;
    base = (unsigned char *)ptr - SF_ALLOC_HDR;
    memcpy(&old, base, sizeof(old));
    if (limited && size > old && over_hard(size - old))
        return NULL;
    np = realloc(base, size + SF_ALLOC_HDR);
    if (np == NULL)
        return NULL;
    memcpy(np, &size, sizeof(size));
    if (size > old)
        account(size - old, 0);
    else
        account(0, old - size);
    return np + SF_ALLOC_HDR;
}

void *sf_realloc(void *ptr, size_t size)
{
    return realloc_counted(ptr, size, 1);
}

void *sf_realloc_unlimited(void *ptr, size_t size)
{
    return realloc_counted(ptr, size, 0);
}

void sf_free(void *ptr)
{
    unsigned char *base;
    size_t size;

    if (ptr == NULL)
        return;
    base = (unsigned char *)ptr - SF_ALLOC_HDR;
    memcpy(&size, base, sizeof(size));
    account(0, size);
    free(base);
}

char *sf_strndup(const char *s, size_t n)
{
    size_t len = strnlen(s, n);
    char *p = sf_malloc(len + 1);

    if (p == NULL)
        return NULL;
    memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

char *sf_strdup(const char *s)
{
    return sf_strndup(s, strlen(s));
}

int sf_alloc_charge(size_t size)
{
    if (over_hard(size))
        return 0;
    account(size, 0);
    return 1;
}

void sf_alloc_uncharge(size_t size)
{
    account(0, size);
}

size_t sf_alloc_in_use(void)
{
    return atomic_load_explicit(&in_use, memory_order_relaxed);
}

void sf_alloc_set_limits(size_t soft, size_t hard)
{
    atomic_store(&limit_soft, soft);
    atomic_store(&limit_hard, hard);
}

void sf_alloc_limits(size_t *soft, size_t *hard)
{
    *soft = atomic_load(&limit_soft);
    *hard = atomic_load(&limit_hard);
}

void sf_alloc_set_external_pressure(int on)
{
    atomic_store_explicit(&external_pressure, on, memory_order_relaxed);
}

int sf_alloc_under_pressure(void)
{
    size_t soft = atomic_load_explicit(&limit_soft, memory_order_relaxed);

    return (soft != 0 && atomic_load_explicit(&in_use, memory_order_relaxed) >= soft) ||
           atomic_load_explicit(&external_pressure, memory_order_relaxed);
}

uint64_t sf_alloc_fail_at(uint64_t nth, int sticky)
{
    atomic_store(&fail_sticky, sticky);
    atomic_store(&fail_nth, nth);
    return atomic_exchange(&count, 0);
}

uint64_t sf_alloc_count(void)
{
    return atomic_load_explicit(&count, memory_order_relaxed);
}

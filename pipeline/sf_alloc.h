/* sf_alloc.h: every heap allocation spanfence makes goes through here, so the
 * bytes in use are always known (the memory limiter reads this count instead
 * of polling RSS) and tests can make the Nth allocation fail.
 *
 * Each block carries a small header with its size; sf_free() must be given a
 * pointer from these functions, never one from plain malloc(). */
#ifndef SF_ALLOC_H
#define SF_ALLOC_H

#include <stddef.h>
#include <stdint.h>

void *sf_malloc(size_t size);                 /* NULL on failure */
void *sf_calloc(size_t n, size_t size);       /* zeroed; NULL on failure or overflow */
/* Like sf_calloc, counted, but never refused by the hard limit: for small
 * bookkeeping that exact accounting depends on (the inflate state that
 * counts a refused compressed body's spans), which must not fail just
 * because memory is short. Use sparingly; sf_free() it as usual. */
void *sf_calloc_unlimited(size_t n, size_t size);
void *sf_realloc(void *p, size_t size);       /* like realloc(); p stays valid on failure */
/* sf_realloc for the same kind of memory as sf_calloc_unlimited: a
 * library's own state whose size its protocol limits already cap (an
 * HTTP/2 session's buffers), which failing would only turn into a lost
 * connection. */
void *sf_realloc_unlimited(void *p, size_t size);
void  sf_free(void *p);                       /* NULL is fine */
char *sf_strdup(const char *s);               /* NULL on failure */
char *sf_strndup(const char *s, size_t n);    /* copies at most n bytes, NUL-terminates */

/* Bytes currently allocated through sf_* (payload, not headers). */
size_t sf_alloc_in_use(void);

/* Memory a library is about to allocate outside sf_malloc (json-c's parse
 * tree): charge an estimate before, so the limits see it, and uncharge the
 * same amount after. sf_alloc_charge() charges nothing and returns 0 when the
 * estimate would pass the hard limit. */
int sf_alloc_charge(size_t size);
void sf_alloc_uncharge(size_t size);

/* Memory limits (the memory_limiter processor sets them; 0 = none). Past
 * `hard`, allocations fail (callers then refuse data with a retryable
 * status); past `soft`, sf_alloc_under_pressure() says to refuse new data
 * before it is decoded. */
void sf_alloc_set_limits(size_t soft, size_t hard);
/* The limits now (0, 0 when no memory_limiter runs): receivers size what
 * they hold outside the count (gRPC's resource quota) from them. */
void sf_alloc_limits(size_t *soft, size_t *hard);
/* Extra pressure from outside the count (RSS sampled over the limit; the
 * memory limiter drops it again as soon as RSS or counted memory is low, so
 * it cannot latch). */
void sf_alloc_set_external_pressure(int on);
/* Whether receivers should refuse new data now. */
int sf_alloc_under_pressure(void);

/* Test hook: the nth allocation from now (1 = the next one) fails, and every
 * one after it too if `sticky`; 0 turns injection off. Returns how many
 * allocations have been made since the last call, so a test can loop
 * "fail allocation k" for k = 1..count. Thread-safe, process-wide. */
uint64_t sf_alloc_fail_at(uint64_t nth, int sticky);
/* Number of allocations attempted since the last sf_alloc_fail_at(). */
uint64_t sf_alloc_count(void);

#endif

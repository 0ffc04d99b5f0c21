/* sf_buf.h: immutable bytes shared by several owners (the codec's
 * canonical output, which every exporter of a pipeline queues), and the
 * pool of warm buffers the codec writes into. */
#ifndef SF_BUF_H
#define SF_BUF_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Immutable bytes shared by several owners. */
typedef struct sf_buf {
    _Atomic int refs;
    bool pooled;                /* given back to the pool, not freed (sf_buf_take) */
    size_t len;
    size_t cap;                 /* bytes data can hold */
    size_t spans;               /* items encoded in data: spans, log records or metric
                                 * data points, by the request's signal */
    uint64_t client;            /* who sent them (sf_request.client): sending
                                 * queues share their room by it (sf_share.h) */
    uint8_t data[];
} sf_buf;

/* A buffer of `len` bytes with one reference; NULL on no memory. */
sf_buf *sf_buf_create(size_t len);
sf_buf *sf_buf_ref(sf_buf *b);
void sf_buf_unref(sf_buf *b);       /* frees on the last reference; NULL ok */

/* Warm buffers for the codec's output. A fresh buffer from 128 KiB up is an
 * mmap (M_MMAP_THRESHOLD, pipeline/cli/main.c), so the codec writing a
 * 500 KB request's output into one paid a page fault per 4 KiB it wrote,
 * and an munmap when its exporters let it go. Threads that opt in (the
 * gRPC receiver's workers) take such buffers from a process-wide pool of
 * idle ones instead, and a pooled buffer's last sf_buf_unref, on whatever
 * thread, gives it back to the pool. The pool keeps at most a sixteenth of
 * the hard memory limit (8 MiB without one) and 16 buffers, the most
 * recently given back; idle buffers stay allocated through sf_alloc, so
 * they are counted like any other memory, and none is kept while memory
 * is short. */

/* Whether the calling thread's sf_buf_take() uses the pool. */
void sf_buf_pool_use(bool on);
/* Frees every idle buffer of the pool (memory is short). */
void sf_buf_pool_trim(void);
/* Bytes the pool keeps idle. */
size_t sf_buf_pool_idle_bytes(void);

/* Like sf_buf_create, but from the pool when the calling thread uses it
 * and `len` is large enough to be worth it: b->cap may then exceed len by
 * a quarter and a step of 16 KiB. Give it back with sf_buf_unref. */
sf_buf *sf_buf_take(size_t len);
/* Room for `cap` bytes in `b` (which only the caller holds), the first
 * `used` kept, and len and spans. A pooled buffer that would shrink by
 * more than a quarter is copied into one of the right size from the pool
 * and given back (the large one is taken again by the next call). On NULL
 * (no memory) `b` is unchanged. */
sf_buf *sf_buf_resize(sf_buf *b, size_t used, size_t cap);

#endif

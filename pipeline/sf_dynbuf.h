/* sf_dynbuf.h: the one growable byte buffer, bounded at init (curl's
 * lib/curlx/dynbuf.h is the model). It grows by doubling through
 * sf_realloc (so it is counted and honours the memory limits), never past
 * `max` bytes of content, and always keeps a NUL after the content so text
 * can be read as a C string.
 *
 * A failing call (SF_TOOBIG past the bound, SF_ENOMEM) appends nothing and
 * leaves the buffer as it was: the caller decides whether to use what is
 * there or to release it. Embedded, not heap-allocated: _init/_release. */
#ifndef SF_DYNBUF_H
#define SF_DYNBUF_H

#include <stdarg.h>
#include <stddef.h>

#include "sf_status.h"

typedef struct sf_dynbuf {
    char *buf;                  /* NULL until the first byte is added */
    size_t len;                 /* content bytes, not counting the NUL */
    size_t cap;                 /* bytes allocated (content + NUL) */
    size_t max;                 /* content never longer than this */
} sf_dynbuf;

/* An empty buffer that may hold up to `max` bytes; allocates nothing. */
void sf_dynbuf_init(sf_dynbuf *b, size_t max);
/* Free the memory; the buffer is empty (and reusable) afterwards. */
void sf_dynbuf_release(sf_dynbuf *b);
/* Empty it, keeping the memory for reuse. */
void sf_dynbuf_reset(sf_dynbuf *b);

/* Append `len` bytes. SF_TOOBIG when the content would pass `max`. */
sf_status sf_dynbuf_add(sf_dynbuf *b, const void *data, size_t len);
sf_status sf_dynbuf_addstr(sf_dynbuf *b, const char *s);
/* Append printf output (the whole of it, or nothing). */
sf_status sf_dynbuf_printf(sf_dynbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
sf_status sf_dynbuf_vprintf(sf_dynbuf *b, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

/* For producers that write in place (inflate, fread): make room for at
 * least `min` more bytes (growing by doubling, within `max`) and return the
 * tail to write at in *tail and how much may be written there in *room
 * (>= min). Then sf_dynbuf_commit() the bytes actually written. */
sf_status sf_dynbuf_room(sf_dynbuf *b, size_t min, void **tail, size_t *room);
void sf_dynbuf_commit(sf_dynbuf *b, size_t n);
/* Allocate exactly enough for `size` bytes of content in all (no doubling),
 * for a caller that accounts for capacity itself; never shrinks. */
sf_status sf_dynbuf_reserve(sf_dynbuf *b, size_t size);

/* Hand the content over: returns it (NUL-terminated, sf_free() it; an empty
 * buffer gives an allocated "", or NULL if even that fails) and sets *len
 * unless NULL. The buffer is empty afterwards. */
char *sf_dynbuf_take(sf_dynbuf *b, size_t *len);

static inline const char *sf_dynbuf_ptr(const sf_dynbuf *b) { return b->buf ? b->buf : ""; }
static inline size_t sf_dynbuf_len(const sf_dynbuf *b) { return b->len; }
/* Content bytes it holds without growing. */
static inline size_t sf_dynbuf_capacity(const sf_dynbuf *b) { return b->cap ? b->cap - 1 : 0; }

#endif

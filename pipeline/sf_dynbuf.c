/* sf_dynbuf.c: the bounded growable buffer (sf_dynbuf.h). Capacity counts
 * the NUL, so a buffer with `max` bytes of content holds max + 1. */
#include "sf_dynbuf.h"
#include "sf_alloc.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define MIN_FIRST_ALLOC 32

void sf_dynbuf_init(sf_dynbuf *b, size_t max)
{
    b->buf = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max < SIZE_MAX ? max : SIZE_MAX - 1;
}

void sf_dynbuf_release(sf_dynbuf *b)
{
    sf_free(b->buf);
    b->buf = NULL;
    b->len = 0;
    b->cap = 0;
}

void sf_dynbuf_reset(sf_dynbuf *b)
{
    b->len = 0;
    if (b->buf != NULL)
        b->buf[0] = '\0';
}

/* Capacity `cap` (content + NUL), exactly. */
static sf_status resize(sf_dynbuf *b, size_t cap)
{
    char *nb = sf_realloc(b->buf, cap);

    if (nb == NULL)
        return SF_ENOMEM;
    if (b->buf == NULL)
        nb[0] = '\0';
    b->buf = nb;
    b->cap = cap;
    return SF_OK;
}

/* Room for `more` content bytes after len, growing by doubling. */
static sf_status ensure(sf_dynbuf *b, size_t more)
{
    size_t need, cap;

    if (more > b->max - b->len)
        return SF_TOOBIG;
    need = b->len + more + 1;
    if (need <= b->cap)
        return SF_OK;
    cap = b->cap ? b->cap : MIN_FIRST_ALLOC;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? SIZE_MAX : cap * 2;
    if (cap > b->max + 1)
        cap = b->max + 1;
    return resize(b, cap);
}

sf_status sf_dynbuf_add(sf_dynbuf *b, const void *data, size_t len)
{
    sf_status st = ensure(b, len);

    if (st != SF_OK)
        return st;
    if (len > 0)
        memcpy(b->buf + b->len, data, len);
    b->len += len;
    if (b->buf != NULL)
        b->buf[b->len] = '\0';
    return SF_OK;
}

sf_status sf_dynbuf_addstr(sf_dynbuf *b, const char *s)
{
    return sf_dynbuf_add(b, s, strlen(s));
}

sf_status sf_dynbuf_vprintf(sf_dynbuf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    int n;
    sf_status st;

    va_copy(ap2, ap);
    n = vsnprintf(b->buf != NULL ? b->buf + b->len : NULL, b->buf != NULL ? b->cap - b->len : 0,
                  fmt, ap2);
    va_end(ap2);
    if (n < 0)
        goto out_restore;
    if (b->buf != NULL && (size_t)n < b->cap - b->len) {
        if ((size_t)n > b->max - b->len)
            goto out_toobig;        /* fitted the allocation, not the bound */
        b->len += (size_t)n;
        return SF_OK;
    }
    st = ensure(b, (size_t)n);
    if (st != SF_OK) {
        if (b->buf != NULL)
            b->buf[b->len] = '\0';
        return st;
    }
    va_copy(ap2, ap);
    vsnprintf(b->buf + b->len, b->cap - b->len, fmt, ap2);
    va_end(ap2);
    b->len += (size_t)n;
    return SF_OK;

out_toobig:
    b->buf[b->len] = '\0';
    return SF_TOOBIG;
out_restore:
    if (b->buf != NULL)
        b->buf[b->len] = '\0';
    return SF_INVALID;
}

sf_status sf_dynbuf_printf(sf_dynbuf *b, const char *fmt, ...)
{
    va_list ap;
    sf_status st;

    va_start(ap, fmt);
    st = sf_dynbuf_vprintf(b, fmt, ap);
    va_end(ap);
    return st;
}

sf_status sf_dynbuf_room(sf_dynbuf *b, size_t min, void **tail, size_t *room)
{
    sf_status st = ensure(b, min);

    if (st != SF_OK)
        return st;
    if (b->buf == NULL && (st = resize(b, 1)) != SF_OK)
        return st;
    *tail = b->buf + b->len;
    *room = b->cap - 1 - b->len;
    if (*room > b->max - b->len)
        *room = b->max - b->len;
    return SF_OK;
}

void sf_dynbuf_commit(sf_dynbuf *b, size_t n)
{
    b->len += n;
    b->buf[b->len] = '\0';
}

sf_status sf_dynbuf_reserve(sf_dynbuf *b, size_t size)
{
    if (size > b->max)
        return SF_TOOBIG;
    if (size + 1 <= b->cap)
        return SF_OK;
    return resize(b, size + 1);
}

char *sf_dynbuf_take(sf_dynbuf *b, size_t *len)
{
    char *p = b->buf;

    if (len != NULL)
        *len = b->len;
    if (p == NULL)
        p = sf_strdup("");
    b->buf = NULL;
    b->len = 0;
    b->cap = 0;
    return p;
}

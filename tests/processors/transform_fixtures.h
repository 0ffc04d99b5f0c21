/* tests/processors/transform_fixtures.h: helpers shared by the transform
 * tests: a parse sink backed by an arena that records every error, and
 * hand-built YAML node trees (the shape the config loader hands to the
 * trace_statements callback). */
#ifndef SF_TEST_TRANSFORM_FIXTURES_H
#define SF_TEST_TRANSFORM_FIXTURES_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "processors/transform/transform.h"

#define FX_MAX_ERRORS 16

typedef struct fx_sink {
    sf_arena *arena;
    int fail_alloc_after;           /* >0: the nth alloc and later fail */
    int allocs;
    size_t n_errors;
    const sf_node *at[FX_MAX_ERRORS];
    char msg[FX_MAX_ERRORS][1024];  /* "subpath: message" */
    sf_transform_sink sink;
} fx_sink;

static void *fx_alloc(void *ctx, size_t size)
{
    fx_sink *s = ctx;

    s->allocs++;
    if (s->fail_alloc_after > 0 && s->allocs >= s->fail_alloc_after)
        return NULL;
    return sf_arena_alloc(s->arena, size);
}

static void fx_error(void *ctx, const sf_node *at, const char *subpath, const char *msg)
{
    fx_sink *s = ctx;

    if (s->n_errors < FX_MAX_ERRORS) {
        s->at[s->n_errors] = at;
        snprintf(s->msg[s->n_errors], sizeof(s->msg[0]), "%s: %s", subpath ? subpath : "-", msg);
    }
    s->n_errors++;
}

static inline void fx_sink_init(fx_sink *s)
{
    memset(s, 0, sizeof(*s));
    s->arena = sf_arena_create(4096, 0);
    s->sink.ctx = s;
    s->sink.alloc = fx_alloc;
    s->sink.error = fx_error;
}

static inline void fx_sink_release(fx_sink *s)
{
    sf_arena_destroy(s->arena);
}

/* Nodes live in the sink's arena; line numbers count up so positions differ. */
static inline sf_node *fx_node(fx_sink *s, sf_node_kind kind)
{
    static int line;
    sf_node *n = sf_arena_alloc(s->arena, sizeof(*n));

    memset(n, 0, sizeof(*n));
    n->kind = kind;
    n->line = ++line;
    n->col = 1;
    return n;
}

static inline sf_node *fx_scalar(fx_sink *s, const char *text)
{
    sf_node *n = fx_node(s, SF_NODE_SCALAR);

    n->text = sf_arena_strndup(s->arena, text, strlen(text));
    n->len = strlen(text);
    return n;
}

static inline sf_node *fx_null(fx_sink *s)
{
    sf_node *n = fx_scalar(s, "");

    n->plain = true;
    n->is_null = true;
    return n;
}

/* fx_seq(s, n, item0, item1, ...) */
static inline sf_node *fx_seq(fx_sink *s, size_t count, ...)
{
    sf_node *n = fx_node(s, SF_NODE_SEQ);
    va_list ap;

    n->n = count;
    n->items = sf_arena_alloc(s->arena, (count ? count : 1) * sizeof(sf_node *));
    va_start(ap, count);
    for (size_t i = 0; i < count; i++)
        n->items[i] = va_arg(ap, sf_node *);
    va_end(ap);
    return n;
}

/* fx_seq_strs(s, n, "stmt0", "stmt1", ...) */
static inline sf_node *fx_seq_strs(fx_sink *s, size_t count, ...)
{
    sf_node *n = fx_node(s, SF_NODE_SEQ);
    va_list ap;

    n->n = count;
    n->items = sf_arena_alloc(s->arena, (count ? count : 1) * sizeof(sf_node *));
    va_start(ap, count);
    for (size_t i = 0; i < count; i++)
        n->items[i] = fx_scalar(s, va_arg(ap, const char *));
    va_end(ap);
    return n;
}

/* fx_map(s, n, "key0", value0, "key1", value1, ...) */
static inline sf_node *fx_map(fx_sink *s, size_t count, ...)
{
    sf_node *n = fx_node(s, SF_NODE_MAP);
    va_list ap;

    n->n = count;
    n->keys = sf_arena_alloc(s->arena, (count ? count : 1) * sizeof(sf_node *));
    n->items = sf_arena_alloc(s->arena, (count ? count : 1) * sizeof(sf_node *));
    va_start(ap, count);
    for (size_t i = 0; i < count; i++) {
        n->keys[i] = fx_scalar(s, va_arg(ap, const char *));
        n->items[i] = va_arg(ap, sf_node *);
    }
    va_end(ap);
    return n;
}

#endif

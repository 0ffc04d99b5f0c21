/* sf_arena.c: chunked bump allocator on top of sf_malloc (so arena memory is
 * counted and allocation failures can be injected per chunk). */
#include "sf_arena.h"
#include "sf_alloc.h"

#include <stdint.h>
#include <string.h>

#define SF_ARENA_ALIGN 16

typedef struct sf_chunk {
    struct sf_chunk *next;
    size_t size;              /* usable bytes after the header */
    size_t used;
    unsigned char data[] __attribute__((aligned(SF_ARENA_ALIGN)));
} sf_chunk;

/* Chunks form a list in creation order; `cur` is the one being filled.
 * A reset rewinds to the first chunk and keeps up to `retain` bytes of
 * chunks for the next round, so a worker that decodes a 2 MB batch per call
 * does not give the pages back to the kernel and fault them in again every
 * time (that costs several times the decode itself). */
struct sf_arena {
    sf_chunk *first;
    sf_chunk *cur;
    size_t chunk_size;
    size_t max_bytes;
    size_t retain;
    size_t total;             /* chunk bytes held, for the cap */
    size_t used;
    int failed;
    ProtobufCAllocator pb;
};

static sf_chunk *chunk_new(sf_arena *a, size_t size)
{
    sf_chunk *c;

    if (a->max_bytes && a->total + size > a->max_bytes)
        return NULL;
    c = sf_malloc(sizeof(*c) + size);
    if (c == NULL)
        return NULL;
    c->next = NULL;
    c->size = size;
    c->used = 0;
    a->total += size;
    return c;
}

static void *pb_alloc(void *data, size_t size)
{
    return sf_arena_alloc(data, size);
}

static void pb_free(void *data, void *p)
{
    (void)data;
    (void)p;
}

sf_arena *sf_arena_create(size_t chunk_size, size_t max_bytes)
{
    sf_arena *a = sf_calloc(1, sizeof(*a));

    if (a == NULL)
        return NULL;
    a->chunk_size = chunk_size ? chunk_size : 64 * 1024;
    a->max_bytes = max_bytes;
    a->retain = 4 * a->chunk_size;
    a->first = chunk_new(a, a->chunk_size);
    if (a->first == NULL) {
        sf_free(a);
        return NULL;
    }
    a->cur = a->first;
    a->pb.alloc = pb_alloc;
    a->pb.free = pb_free;
    a->pb.allocator_data = a;
    return a;
}

static void free_chunks(sf_arena *a, sf_chunk *c)
{
    while (c != NULL) {
        sf_chunk *next = c->next;
        a->total -= c->size;
        sf_free(c);
        c = next;
    }
}

void sf_arena_destroy(sf_arena *a)
{
    if (a == NULL)
        return;
    free_chunks(a, a->first);
    sf_free(a);
}

void *sf_arena_alloc(sf_arena *a, size_t size)
{
    sf_chunk *c = a->cur;
    size_t need = (size + SF_ARENA_ALIGN - 1) & ~(size_t)(SF_ARENA_ALIGN - 1);
    void *p;

    if (need < size) {
        a->failed = 1;
        return NULL;
    }
    while (c->size - c->used < need) {
        if (c->next != NULL && c->next->size >= need) {
            c = c->next;            /* a retained chunk, empty since the reset */
            continue;
        }
        /* A new chunk after the current one (a retained chunk too small for
         * this request stays in the list, after it). */
        sf_chunk *n = chunk_new(a, need > a->chunk_size ? need : a->chunk_size);
        if (n == NULL) {
            a->failed = 1;
            return NULL;
        }
        n->next = c->next;
        c->next = n;
        c = n;
    }
    a->cur = c;
    p = c->data + c->used;
    c->used += need;
    a->used += need;
    return p;
}

char *sf_arena_strndup(sf_arena *a, const char *s, size_t n)
{
    size_t len = strnlen(s, n);
    char *p = sf_arena_alloc(a, len + 1);

    if (p == NULL)
        return NULL;
    memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

void sf_arena_reset(sf_arena *a)
{
    size_t kept = 0;
    sf_chunk *c = a->first, *last = NULL;

    /* Keep chunks from the start of the list while within `retain`. */
    while (c != NULL && (last == NULL || kept + c->size <= a->retain)) {
        kept += c->size;
        c->used = 0;
        last = c;
        c = c->next;
    }
    last->next = NULL;
    free_chunks(a, c);
    a->cur = a->first;
    a->used = 0;
    a->failed = 0;
}

int sf_arena_failed(const sf_arena *a)
{
    return a->failed;
}

size_t sf_arena_used(const sf_arena *a)
{
    return a->used;
}

ProtobufCAllocator *sf_arena_pb_allocator(sf_arena *a)
{
    return &a->pb;
}

static void *pb_counted_alloc(void *data, size_t size)
{
    (void)data;
    return sf_malloc(size);
}

static void pb_counted_free(void *data, void *p)
{
    (void)data;
    sf_free(p);
}

ProtobufCAllocator *sf_pb_counted_allocator(void)
{
    static ProtobufCAllocator counted = { .alloc = pb_counted_alloc, .free = pb_counted_free };

    return &counted;
}

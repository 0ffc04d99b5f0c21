/* sf_arena.h: region allocator. A batch decodes into an arena and frees
 * everything at once; a receiver worker keeps one arena and resets it per
 * request, so the heap does not shrink and regrow on every call.
 *
 * Not thread-safe: an arena belongs to one thread at a time. */
#ifndef SF_ARENA_H
#define SF_ARENA_H

#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

typedef struct sf_arena sf_arena;

/* chunk_size: bytes per chunk (larger requests get a chunk of their own);
 * max_bytes: hard cap on the arena's total (0 = none). NULL on no memory. */
sf_arena *sf_arena_create(size_t chunk_size, size_t max_bytes);
void sf_arena_destroy(sf_arena *a);

/* 16-byte aligned; NULL when memory or the cap is exhausted. */
void *sf_arena_alloc(sf_arena *a, size_t size);
char *sf_arena_strndup(sf_arena *a, const char *s, size_t n);

/* Frees everything allocated since creation or the last reset; keeps up to
 * four chunks' worth for reuse. */
void sf_arena_reset(sf_arena *a);
/* Whether an allocation failed since creation or the last reset. */
int sf_arena_failed(const sf_arena *a);
/* Bytes handed out (not counting chunk slack). */
size_t sf_arena_used(const sf_arena *a);

/* A protobuf-c allocator backed by `a` (free is a no-op). The returned
 * struct lives inside the arena object: valid until sf_arena_destroy(). */
ProtobufCAllocator *sf_arena_pb_allocator(sf_arena *a);
/* protobuf-c's allocator on the counted heap (sf_malloc, sf_free), no
 * arena: for a small message unpacked and freed on its own (a reply). */
ProtobufCAllocator *sf_pb_counted_allocator(void);

#endif

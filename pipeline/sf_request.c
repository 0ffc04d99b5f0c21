/* sf_request.c: a request moving through a pipeline (raw bytes, then the
 * codec's canonical bytes, decoded into an arena only for readers that want
 * a tree). */
#include "sf_request.h"
#include "sf_alloc.h"

#include <string.h>

/* ---- decode / encode ---------------------------------------------------- */

sf_status sf_request_init(sf_request *b, sf_arena *arena, const uint8_t *data, size_t len,
                        unsigned max_depth)
{
    return sf_request_init_signal(b, arena, SF_SIGNAL_TRACES, data, len, max_depth);
}

sf_status sf_request_init_signal(sf_request *b, sf_arena *arena, sf_signal signal,
                                 const uint8_t *data, size_t len, unsigned max_depth)
{
    memset(b, 0, sizeof(*b));
    b->signal = signal;
    b->arena = arena;
    b->raw = data;
    b->raw_len = len;
    b->max_depth = max_depth;
    return SF_OK;
}

sf_status sf_request_rewrite(sf_request *b, const sf_otlp_edit *edit, const void *by)
{
    const uint8_t *in = b->wire != NULL ? b->wire->data : b->raw;
    size_t len = b->wire != NULL ? b->wire->len : b->raw_len;
    sf_otlp_stats stats;
    sf_buf *out;
    sf_status st = sf_otlp_rewrite_signal(b->signal, in, len, b->max_depth, edit, &out, &stats);

    if (st != SF_OK) {
        if (b->wire == NULL)
            b->spans = stats.spans + stats.filtered_items + stats.capped_items;
        b->stats.error = stats.error;
        return st;
    }
    sf_buf_unref(b->wire);
    b->wire = out;
    b->spans = stats.spans;
    b->stats = stats;
    b->edited_by = by;
    b->edit_status = SF_OK;
    b->req = NULL;
    return SF_OK;
}

sf_status sf_request_tree(sf_request *b)
{
    sf_status st;

    if (b->req != NULL)
        return SF_OK;
    if (b->signal != SF_SIGNAL_TRACES)
        return SF_UNSUPPORTED;
    if (b->wire == NULL && (st = sf_request_rewrite(b, NULL, NULL)) != SF_OK)
        return st;
    if (b->arena == NULL)
        return SF_ENOMEM;
    b->req = opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
        sf_arena_pb_allocator(b->arena), b->wire->len, b->wire->data);
    if (b->req == NULL)
        return sf_arena_failed(b->arena) ? SF_ENOMEM : SF_INVALID;
    return SF_OK;
}

sf_status sf_request_decode(sf_request *b, sf_arena *arena, const uint8_t *data, size_t len,
                          unsigned max_depth)
{
    sf_request_init(b, arena, data, len, max_depth);
    return sf_request_tree(b);
}

sf_status sf_request_encode(sf_request *b, sf_buf **out)
{
    if (b->wire == NULL) {
        sf_status st = sf_request_rewrite(b, NULL, NULL);
        if (st != SF_OK)
            return st;
    }
    b->wire->spans = b->spans;
    b->wire->client = b->client;
    *out = sf_buf_ref(b->wire);
    return SF_OK;
}

void sf_request_release(sf_request *b)
{
    sf_buf_unref(b->wire);
    b->wire = NULL;
    b->req = NULL;
}

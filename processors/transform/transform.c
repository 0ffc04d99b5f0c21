/* processors/transform/transform.c: the `transform` processor on the data
 * path: runs the parsed program over every resource, scope, span, span event
 * and link of a batch, editing the arena-owned tree in place; consume_wire
 * runs the same program over the encoded request (transform_wire.c).
 *
 * DESIGN: consume runs concurrently on several receiver threads. The only
 * state is the config and its compiled wire form (both read-only after
 * create) and the component's atomic counters. keep_keys and delete_key compact the KeyValue pointer array in
 * place and allocate nothing, so they cannot fail for lack of memory. What
 * can fail is a corrupt tree (a NULL where a message or key is required):
 * under error_mode propagate the whole batch fails with SF_FILTER and the
 * caller drops it (fail closed); under ignore/silent that statement is
 * skipped for that item and the rest goes on (fail open, as upstream). */
#include "transform.h"

#include <stdint.h>

typedef struct run {
    const sf_transform_config *cfg;
    uint64_t removed;           /* attributes removed */
    uint64_t skipped_ignore;    /* statements skipped under error_mode ignore */
} run;

#define CTX_BIT(c) (1u << (c))
#define BELOW_RESOURCE_SPANS (CTX_BIT(SF_TRANSFORM_RESOURCE) | BELOW_SCOPE_SPANS)
#define BELOW_SCOPE_SPANS (CTX_BIT(SF_TRANSFORM_SCOPE) | BELOW_SPAN)
#define BELOW_SPAN (CTX_BIT(SF_TRANSFORM_SPAN) | CTX_BIT(SF_TRANSFORM_SPANEVENT) | \
                    CTX_BIT(SF_TRANSFORM_LINK))

static bool has_ops(const run *r, sf_transform_ctx c)
{
    return sf_transform_op_count(r->cfg->program, c) > 0;
}

/* Statement `op` could not be applied to one item: 0 to go on without it,
 * -1 to fail the batch. */
static int op_failed(run *r, const sf_transform_op *op)
{
    int mode = sf_transform_op_error_mode(r->cfg, op);

    if (mode == SF_ERROR_MODE_PROPAGATE)
        return -1;
    if (mode == SF_ERROR_MODE_IGNORE)
        r->skipped_ignore++;
    return 0;
}

/* A message that the statements of the contexts in `mask` needed is missing
 * (a NULL where the tree must have one): the strictest error mode among
 * those statements decides. */
static int tree_broken(run *r, unsigned mask)
{
    int strictest = -1;

    for (int c = 0; c < SF_TRANSFORM_CTX_COUNT; c++) {
        if (!(mask & CTX_BIT(c)))
            continue;
        for (size_t i = 0; i < sf_transform_op_count(r->cfg->program, c); i++) {
            int m = sf_transform_op_error_mode(r->cfg,
                                               sf_transform_op_get(r->cfg->program, c, i));
            if (strictest < 0 || m < strictest)
                strictest = m;
        }
    }
    if (strictest == SF_ERROR_MODE_PROPAGATE)
        return -1;
    if (strictest == SF_ERROR_MODE_IGNORE)
        r->skipped_ignore++;
    return 0;
}

/* keep_keys (keep the listed keys) or delete_key (drop the listed key) on
 * one attribute array. Checks the whole array before touching it, so a
 * skipped statement leaves the item exactly as it was. */
static int filter_attributes(run *r, const sf_transform_op *op, sf_otlp_kv **kv, size_t *n,
                             uint32_t *dropped)
{
    const bool keep_listed = op->kind == SF_TRANSFORM_KEEP_KEYS;
    size_t w = 0, gone;

    if (*n == 0)
        return 0;
    if (kv == NULL)
        return -1;
    for (size_t i = 0; i < *n; i++) {
        if (kv[i] == NULL || kv[i]->key == NULL)
            return -1;
    }
    for (size_t i = 0; i < *n; i++) {
        if (sf_transform_keyset_has(&op->keys, kv[i]->key) == keep_listed)
            kv[w++] = kv[i];
    }
    gone = *n - w;
    *n = w;
    *dropped = gone > (size_t)(UINT32_MAX - *dropped) ? UINT32_MAX : *dropped + (uint32_t)gone;
    r->removed += gone;
    return 0;
}

/* Every statement of context c on one item (its attributes, and for spans
 * its status). 0 to go on, -1 to fail the batch. */
static int run_item(run *r, sf_transform_ctx c, sf_otlp_kv **kv, size_t *n, uint32_t *dropped,
                    sf_otlp_status *status)
{
    const sf_transform_program *p = r->cfg->program;

    for (size_t i = 0; i < sf_transform_op_count(p, c); i++) {
        const sf_transform_op *op = sf_transform_op_get(p, c, i);

        if (op->kind == SF_TRANSFORM_CLEAR_STATUS_MESSAGE) {
            if (status != NULL)
                status->message = (char *)protobuf_c_empty_string;
            continue;
        }
        if (filter_attributes(r, op, kv, n, dropped) != 0 && op_failed(r, op) != 0)
            return -1;
    }
    return 0;
}

static int run_span(run *r, sf_otlp_span *span)
{
    if (has_ops(r, SF_TRANSFORM_SPAN) &&
        run_item(r, SF_TRANSFORM_SPAN, span->attributes, &span->n_attributes,
                 &span->dropped_attributes_count, span->status) != 0)
        return -1;
    if (has_ops(r, SF_TRANSFORM_SPANEVENT)) {
        if (span->n_events > 0 && span->events == NULL) {
            if (tree_broken(r, CTX_BIT(SF_TRANSFORM_SPANEVENT)) != 0)
                return -1;
        } else {
            for (size_t i = 0; i < span->n_events; i++) {
                sf_otlp_event *ev = span->events[i];

                if (ev == NULL) {
                    if (tree_broken(r, CTX_BIT(SF_TRANSFORM_SPANEVENT)) != 0)
                        return -1;
                    continue;
                }
                if (run_item(r, SF_TRANSFORM_SPANEVENT, ev->attributes, &ev->n_attributes,
                             &ev->dropped_attributes_count, NULL) != 0)
                    return -1;
            }
        }
    }
    if (has_ops(r, SF_TRANSFORM_LINK)) {
        if (span->n_links > 0 && span->links == NULL) {
            if (tree_broken(r, CTX_BIT(SF_TRANSFORM_LINK)) != 0)
                return -1;
        } else {
            for (size_t i = 0; i < span->n_links; i++) {
                sf_otlp_link *ln = span->links[i];

                if (ln == NULL) {
                    if (tree_broken(r, CTX_BIT(SF_TRANSFORM_LINK)) != 0)
                        return -1;
                    continue;
                }
                if (run_item(r, SF_TRANSFORM_LINK, ln->attributes, &ln->n_attributes,
                             &ln->dropped_attributes_count, NULL) != 0)
                    return -1;
            }
        }
    }
    return 0;
}

static int run_scope_spans(run *r, sf_otlp_scope_spans *ss, bool spans_too)
{
    sf_otlp_scope *scope = ss->scope;

    /* A missing scope (or resource) is valid OTLP: nothing to filter. */
    if (scope != NULL && has_ops(r, SF_TRANSFORM_SCOPE) &&
        run_item(r, SF_TRANSFORM_SCOPE, scope->attributes, &scope->n_attributes,
                 &scope->dropped_attributes_count, NULL) != 0)
        return -1;
    if (!spans_too)
        return 0;
    if (ss->n_spans > 0 && ss->spans == NULL)
        return tree_broken(r, BELOW_SPAN);
    for (size_t i = 0; i < ss->n_spans; i++) {
        if (ss->spans[i] == NULL) {
            if (tree_broken(r, BELOW_SPAN) != 0)
                return -1;
            continue;
        }
        if (run_span(r, ss->spans[i]) != 0)
            return -1;
    }
    return 0;
}

static int run_request(run *r, sf_otlp_request *req)
{
    const bool spans_too = has_ops(r, SF_TRANSFORM_SPAN) || has_ops(r, SF_TRANSFORM_SPANEVENT) ||
                           has_ops(r, SF_TRANSFORM_LINK);
    const bool scopes_too = spans_too || has_ops(r, SF_TRANSFORM_SCOPE);

    if (req->n_resource_spans > 0 && req->resource_spans == NULL)
        return tree_broken(r, BELOW_RESOURCE_SPANS);
    for (size_t i = 0; i < req->n_resource_spans; i++) {
        sf_otlp_resource_spans *rs = req->resource_spans[i];

        if (rs == NULL) {
            if (tree_broken(r, BELOW_RESOURCE_SPANS) != 0)
                return -1;
            continue;
        }
        if (rs->resource != NULL && has_ops(r, SF_TRANSFORM_RESOURCE) &&
            run_item(r, SF_TRANSFORM_RESOURCE, rs->resource->attributes,
                     &rs->resource->n_attributes, &rs->resource->dropped_attributes_count,
                     NULL) != 0)
            return -1;
        if (!scopes_too)
            continue;
        if (rs->n_scope_spans > 0 && rs->scope_spans == NULL) {
            if (tree_broken(r, BELOW_SCOPE_SPANS) != 0)
                return -1;
            continue;
        }
        for (size_t j = 0; j < rs->n_scope_spans; j++) {
            if (rs->scope_spans[j] == NULL) {
                if (tree_broken(r, BELOW_SCOPE_SPANS) != 0)
                    return -1;
                continue;
            }
            if (run_scope_spans(r, rs->scope_spans[j], spans_too) != 0)
                return -1;
        }
    }
    return 0;
}

/* The instance: the program lives with the loaded config; the wire path's
 * compiled form of it is built here, read-only afterwards. */
typedef struct transform_ctx {
    const sf_transform_config *cfg;
    sf_transform_wire *wire;
} transform_ctx;

static sf_status transform_create(sf_component *self, const void *config)
{
    transform_ctx *ctx = sf_calloc(1, sizeof(*ctx));
    sf_status st;

    if (ctx == NULL)
        return SF_ENOMEM;
    ctx->cfg = config;
    st = sf_transform_wire_create(config, &ctx->wire);
    if (st != SF_OK)
        goto out_free_ctx;
    sf_component_set_ctx(self, ctx);
    return SF_OK;

out_free_ctx:
    sf_free(ctx);
    return st;
}

static void transform_destroy(sf_component *self)
{
    transform_ctx *ctx = sf_component_ctx(self);

    if (ctx == NULL)
        return;
    sf_transform_wire_destroy(ctx->wire);
    sf_free(ctx);
    sf_component_set_ctx(self, NULL);
}

static sf_status transform_consume(sf_component *self, sf_batch *batch)
{
    sf_counters *counters = sf_component_counters(self);
    const transform_ctx *ctx = sf_component_ctx(self);
    run r = { .cfg = ctx->cfg };

    sf_count(&counters->incoming_items, batch->spans);
    /* Without a request there is nothing that could be passed on safely,
     * whatever the error mode. */
    if (batch->req == NULL || run_request(&r, batch->req) != 0) {
        sf_count(&counters->dropped_spans[SF_REASON_FILTER_FAILED], batch->spans);
        sf_warn("processor %s: dropped a batch of %zu spans that could not be filtered",
                sf_component_id(self), batch->spans);
        return SF_FILTER;
    }
    if (r.skipped_ignore > 0)
        sf_warn("processor %s: %llu statements could not be applied and were skipped "
                "(error_mode ignore)", sf_component_id(self),
                (unsigned long long)r.skipped_ignore);
    sf_count(&counters->removed_attributes, r.removed);
    sf_count(&counters->outgoing_items, batch->spans);
    return SF_OK;
}

/* The same filter on the encoded request (transform_wire.c), counted as
 * consume counts. SF_UNSUPPORTED: consume runs next and counts instead. */
static sf_status transform_consume_wire(sf_component *self, const uint8_t *in, size_t len,
                                        size_t spans, sf_buf **out)
{
    const transform_ctx *ctx = sf_component_ctx(self);
    sf_counters *counters = sf_component_counters(self);
    uint64_t removed;
    sf_status st = sf_transform_wire_filter(ctx->wire, in, len, spans, out, &removed);

    if (st == SF_UNSUPPORTED)
        return st;
    sf_count(&counters->incoming_items, spans);
    if (st != SF_OK) {
        sf_count(&counters->dropped_spans[SF_REASON_FILTER_FAILED], spans);
        sf_warn("processor %s: dropped a batch of %zu spans that could not be filtered",
                sf_component_id(self), spans);
        return SF_FILTER;
    }
    sf_count(&counters->removed_attributes, removed);
    sf_count(&counters->outgoing_items, spans);
    return SF_OK;
}

const sf_component_type sf_transform_processor_type = {
    .name = "transform",
    .kind = SF_KIND_PROCESSOR,
    .description = "keeps only allowlisted attributes, clears status messages",
    .config_size = sizeof(sf_transform_config),
    .config_map = sf_transform_config_map,
    .create = transform_create,
    .consume = transform_consume,
    .consume_wire = transform_consume_wire,
    .destroy = transform_destroy,
};

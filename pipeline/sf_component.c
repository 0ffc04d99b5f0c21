/* sf_component.c: the accessors components use on their opaque instance. */
#include "internal/sf_core.h"

const char *sf_component_id(const sf_component *c)
{
    return c->id;
}

sf_signal sf_component_signal(const sf_component *c)
{
    return c->signal;
}

const sf_component_type *sf_component_type_of(const sf_component *c)
{
    return c->type;
}

void *sf_component_ctx(const sf_component *c)
{
    return c->ctx;
}

void sf_component_set_ctx(sf_component *c, void *ctx)
{
    c->ctx = ctx;
}

bool sf_component_is_successor(const sf_component *c)
{
    return c->successor;
}

sf_counters *sf_component_counters(sf_component *c)
{
    return &c->counters;
}

void sf_component_set_transports(sf_component *receiver, unsigned mask)
{
    receiver->transports = mask;
}

/* The outcome of the edit the core ran for processor `self` on `batch`
 * (SF_FILTER when it did not run: fail closed). On failure the batch's
 * items are counted dropped (memory_limit for SF_ENOMEM, else
 * filter_failed), with one line, and the status is SF_ENOMEM or SF_FILTER. */
static sf_status edit_outcome(sf_component *self, const sf_request *batch)
{
    sf_status st = batch->edited_by == self ? batch->edit_status : SF_FILTER;
    bool memory = st == SF_ENOMEM;

    if (st == SF_OK)
        return SF_OK;
    sf_count(&self->counters.dropped_spans[memory ? SF_REASON_MEMORY_LIMIT
                                                  : SF_REASON_FILTER_FAILED], batch->spans);
    sf_warn("processor %s: dropped a batch of %zu %s %s (%s)", self->id, batch->spans,
            sf_signal_items(batch->signal), self->type->edit_failure, sf_status_str(st));
    return memory ? SF_ENOMEM : SF_FILTER;
}

/* The consume of a processor whose type gives an edit and no consume. The
 * items its pass took out of the batch (the filter's metrics, spans past
 * the transform's caps) were received but are not in batch->spans: they
 * count as incoming and as dropped, so every item received is sent or
 * counted. */
static sf_status edit_consume(sf_component *p, sf_request *batch)
{
    sf_counters *counters = &p->counters;
    const sf_otlp_stats *stats = &batch->stats;
    const bool edited = batch->edited_by == p && batch->edit_status == SF_OK;
    const size_t failed = edited ? stats->filter_failed_items : 0;
    const size_t filtered = edited ? stats->filtered_items - failed + stats->capped_items : 0;
    sf_status st;

    sf_count(&counters->incoming_items, batch->spans + filtered + failed);
    if (p->type->edit(p, batch->signal) == NULL) {
        /* nothing of this signal to change: it passes as it came */
        sf_count(&counters->outgoing_items, batch->spans);
        return SF_OK;
    }
    st = edit_outcome(p, batch);
    if (st != SF_OK)
        return st;
    sf_count(&counters->dropped_spans[SF_REASON_FILTERED], filtered);
    sf_count(&counters->dropped_spans[SF_REASON_FILTER_FAILED], failed);
    sf_count(&counters->removed_attributes, stats->removed_attributes);
    if (p->type->edited != NULL)
        p->type->edited(p, batch);
    sf_count(&counters->outgoing_items, batch->spans);
    return SF_OK;
}

sf_status sf_component_consume(sf_component *p, sf_request *batch)
{
    return p->type->consume != NULL ? p->type->consume(p, batch) : edit_consume(p, batch);
}

sf_status sf_component_process(sf_component *p, sf_request *batch)
{
    const sf_otlp_edit *e = p->type->edit != NULL ? p->type->edit(p, batch->signal) : NULL;

    if (e != NULL && batch->edited_by != p) {
        size_t spans = batch->spans;
        sf_status st = sf_request_rewrite(batch, e, p);

        if (st != SF_OK) {
            /* the batch is refused whole: its count stays what the
             * pipeline counted, not the spans the pass saw before it
             * stopped */
            batch->spans = spans;
            batch->edited_by = p;
            batch->edit_status = st;
        }
    }
    return sf_component_consume(p, batch);
}

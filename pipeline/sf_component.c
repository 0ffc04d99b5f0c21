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

sf_status sf_component_edit_outcome(sf_component *self, const sf_request *batch,
                                    const char *what)
{
    sf_status st = batch->edited_by == self ? batch->edit_status : SF_FILTER;
    bool memory = st == SF_ENOMEM;

    if (st == SF_OK)
        return SF_OK;
    sf_count(&self->counters.dropped_spans[memory ? SF_REASON_MEMORY_LIMIT
                                                  : SF_REASON_FILTER_FAILED], batch->spans);
    sf_warn("processor %s: dropped a batch of %zu %s %s (%s)", self->id, batch->spans,
            sf_signal_items(batch->signal), what, sf_status_str(st));
    return memory ? SF_ENOMEM : SF_FILTER;
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
    return p->type->consume(p, batch);
}

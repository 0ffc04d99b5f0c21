/* sf_component.c: the accessors components use on their opaque instance. */
#include "internal/sf_core.h"

const char *sf_component_id(const sf_component *c)
{
    return c->id;
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

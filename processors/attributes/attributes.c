/* processors/attributes/attributes.c: the `attributes` processor (actions on
 * span, log record and data point attributes) and the `resource` processor
 * (the same actions on resource attributes) on the data path. Their
 * actions are compiled at create into one codec edit (sf_otlp_wire.h): the
 * deleted keys as a keyset that keeps every other key, inserts, updates
 * and upserts as the edit's inserts. The contexts are the signals' own, so
 * the one edit serves traces, logs and metrics alike; the core runs it and
 * accounts for it.
 *
 * DESIGN: inserted values are the operator's constants (${env:} expanded at
 * load), so the codec does not judge them by a keyset; a transform later in
 * the pipeline does. The edit is read-only after create: the core runs it
 * on receiver threads, concurrently. */
#include "attributes.h"

#include <string.h>

/* The type's own series (sf_counters.values). */
enum { AM_INSERTED };

typedef struct attributes_ctx {
    sf_otlp_keyset *deletes;            /* NULL: no delete */
    sf_otlp_insert *inserts;
    size_t n_inserts;
    sf_otlp_edit edit;
} attributes_ctx;

static void attributes_destroy(sf_component *self)
{
    attributes_ctx *a = sf_component_ctx(self);

    if (a == NULL)
        return;
    sf_otlp_keyset_destroy(a->deletes);
    sf_free(a->inserts);
    sf_free(a);
    sf_component_set_ctx(self, NULL);
}

/* The actions as an edit on the contexts of `mask` (SF_OTLP_CTX_BITs). */
static sf_status attributes_build(sf_component *self, const sf_attributes_config *cfg,
                                  unsigned mask)
{
    attributes_ctx *a = sf_calloc(1, sizeof(*a));
    const char **keys = NULL;
    bool *keep = NULL;
    size_t n_del = 0;
    sf_status st = SF_ENOMEM;

    if (a == NULL)
        return SF_ENOMEM;
    sf_component_set_ctx(self, a);
    a->inserts = sf_calloc(cfg->actions.n ? cfg->actions.n : 1, sizeof(*a->inserts));
    keys = sf_calloc(cfg->actions.n ? cfg->actions.n : 1, sizeof(*keys));
    keep = sf_calloc(cfg->actions.n ? cfg->actions.n : 1, sizeof(*keep));
    if (a->inserts == NULL || keys == NULL || keep == NULL)
        goto out_destroy;
    for (size_t i = 0; i < cfg->actions.n; i++) {
        const sf_attr_action *ac = &cfg->actions.v[i];

        if (ac->action == SF_ATTR_DELETE) {
            keys[n_del++] = ac->key;
            continue;
        }
        a->inserts[a->n_inserts++] = (sf_otlp_insert){
            .key = ac->key, .value = ac->value, .upsert = ac->action == SF_ATTR_UPSERT,
            .update = ac->action == SF_ATTR_UPDATE,
        };
    }
    if (n_del > 0) {
        st = sf_otlp_keyset_create(n_del, keys, keep, true, &a->deletes);
        if (st != SF_OK)
            goto out_destroy;
    }
    for (int c = 0; c < SF_OTLP_CTX_COUNT; c++) {
        if (!(mask & SF_OTLP_CTX_BIT(c)))
            continue;
        a->edit.keys[c] = a->deletes;
        a->edit.n_inserts[c] = a->n_inserts;
        a->edit.inserts[c] = a->n_inserts > 0 ? a->inserts : NULL;
    }
    a->edit.ctx = a;
    sf_free(keys);
    sf_free(keep);
    return SF_OK;

out_destroy:
    sf_free(keys);
    sf_free(keep);
    attributes_destroy(self);
    return st;
}

/* upstream's attributes processor: span attributes (not events or links),
 * log record attributes, data point attributes */
static sf_status attributes_create(sf_component *self, const void *config)
{
    return attributes_build(self, config, SF_OTLP_CTX_BIT(SF_OTLP_SPAN) |
                                          SF_OTLP_CTX_BIT(SF_OTLP_LOG) |
                                          SF_OTLP_CTX_BIT(SF_OTLP_DATAPOINT));
}

static sf_status resource_create(sf_component *self, const void *config)
{
    return attributes_build(self, config, SF_OTLP_CTX_BIT(SF_OTLP_RESOURCE));
}

/* The same edit for every signal: its contexts are disjoint. */
static const sf_otlp_edit *attributes_edit(const sf_component *self, sf_signal signal)
{
    const attributes_ctx *a = sf_component_ctx(self);

    (void)signal;
    return &a->edit;
}

/* Only what the edit inserted: the core counts the rest. */
static void attributes_edited(sf_component *self, const sf_request *batch)
{
    sf_count(&sf_component_counters(self)->values[AM_INSERTED], batch->stats.inserted);
}

static const sf_metric_row attributes_metric_rows[] = {
    [AM_INSERTED] = { .name = "spanfence_processor_attributes_inserted",
      .help = "Attributes the processor's insert, update and upsert actions added or set." },
    { 0 }
};

const sf_component_type sf_attributes_processor_type = {
    .name = "attributes",
    .kind = SF_KIND_PROCESSOR,
    .signals = SF_SIGNALS_ALL,
    .description = "inserts, updates, upserts or deletes span, log record and data point attributes "
                   "(string constants, ${env:} values)",
    .config_size = sizeof(sf_attributes_config),
    .config_map = sf_attributes_config_map,
    .check = sf_attributes_check,
    .create = attributes_create,
    .edit = attributes_edit,
    .edit_failure = "its actions could not be applied to",
    .edited = attributes_edited,
    .destroy = attributes_destroy,
    .metric_rows = attributes_metric_rows,
};

const sf_component_type sf_resource_processor_type = {
    .name = "resource",
    .kind = SF_KIND_PROCESSOR,
    .signals = SF_SIGNALS_ALL,
    .description = "inserts, updates, upserts or deletes resource attributes (string constants, "
                   "${env:} values)",
    .config_size = sizeof(sf_attributes_config),
    .config_map = sf_resource_config_map,
    .check = sf_attributes_check,
    .create = resource_create,
    .edit = attributes_edit,
    .edit_failure = "its actions could not be applied to",
    .edited = attributes_edited,
    .destroy = attributes_destroy,
    .metric_rows = attributes_metric_rows,
};

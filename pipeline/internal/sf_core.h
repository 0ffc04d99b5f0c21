/* internal/sf_core.h: core-only declarations. Components must not include
 * this; they see sf_component as opaque through sf_component.h. */
#ifndef SF_CORE_H
#define SF_CORE_H

#include "../sf_component.h"

struct sf_service;
struct sf_route;

struct sf_component {
    const sf_component_type *type;
    const char *id;                 /* points into the loaded config */
    const void *config;
    void *ctx;
    struct sf_service *service;
    sf_counters counters;
    /* takes over from the instance of the same type and id that ran before
     * a reload (sf_service_start_from) */
    bool successor;
    /* processors and exporters: the signal of the pipelines this instance
     * serves (one instance per signal a config component is used for) */
    sf_signal signal;
    /* receivers: counters per signal and transport, which transports are
     * served, and the signals of the pipelines that list the receiver
     * (SF_SIGNALS_* bits: their series are shown) */
    sf_counters transport[SF_SIGNAL_COUNT][SF_TRANSPORT_COUNT];
    unsigned transports;
    unsigned signals;
    /* receivers: the pipelines this receiver feeds, of every signal */
    size_t n_routes;
    struct sf_route **routes;
    /* this component's share of the service's memory budget (memory
     * limiters; sf_component_set_memory_limits), under the budget lock */
    size_t mem_soft, mem_hard;
    bool mem_pressure;
    /* processors whose type has describe_batching: the counts of the
     * requests the exporters' sending queues form for them
     * (sf_component_batching hands it out; sf_metrics.c renders it) */
    sf_batch_stats batch;
    /* a component an earlier config had and the running one has not: its
     * final counts only (sf_service.c keeps them, sf_metrics.c renders
     * them marked retired="true"); never started, no ctx */
    bool retired;
};

/* Hand `batch` to processor p as a pipeline does: its edit first, run by
 * the core (unless the batch's pass already ran it: edited_by == p) with
 * the outcome recorded in the batch (edited_by, edit_status), then its
 * consume, which accounts for it. Returns what consume returns. */
sf_status sf_component_process(sf_component *p, sf_request *batch);
/* Processor p's consume alone (the edit's outcome already in the batch):
 * its type's, or the core's accounting for a type that gives an edit and
 * no consume (sf_component_type.edit_failure, .edited). */
sf_status sf_component_consume(sf_component *p, sf_request *batch);

/* NULL-terminated table of every component type spanfence has. Defined
 * outside the core, by the build's list of components
 * (pipeline/cli/components.c), which every program links. */
extern const sf_component_type *const sf_registry[];

/* Upstream component types this build does not have, each with what to
 * use instead, for the config's messages; ended by a NULL name. Defined
 * beside sf_registry (pipeline/cli/components.c). */
typedef struct sf_foreign_type {
    sf_kind kind;
    const char *name;               /* "filter" */
    const char *instead;            /* "drop attributes with transform's keep_keys" */
} sf_foreign_type;

extern const sf_foreign_type sf_foreign_types[];

/* The type registered under `name` (or its alias) for `kind`, or NULL. */
const sf_component_type *sf_registry_find(sf_kind kind, const char *name);
/* The subcommand `name` some type brings (type->verbs), or NULL. */
const sf_cli_verb *sf_registry_find_verb(const char *name);
/* "receiver", "processor", "exporter", "extension" */
const char *sf_kind_name(sf_kind kind);

#endif

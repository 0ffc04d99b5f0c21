/* sf_registry.c: lookups in the table of component types, by the type name
 * used in the YAML config (the part of an id before '/'), and by the
 * subcommands types bring. The table itself, sf_registry[], is the build's
 * list of built-in components (pipeline/cli/components.c), outside the
 * core: the core knows components only through sf_component_type. */
#include "internal/sf_core.h"

#include <string.h>

const sf_component_type *sf_registry_find(sf_kind kind, const char *name)
{
    for (const sf_component_type *const *t = sf_registry; *t != NULL; t++) {
        if ((*t)->kind != kind)
            continue;
        if (strcmp((*t)->name, name) == 0 || ((*t)->alias && strcmp((*t)->alias, name) == 0))
            return *t;
    }
    return NULL;
}

const sf_cli_verb *sf_registry_find_verb(const char *name)
{
    for (const sf_component_type *const *t = sf_registry; *t != NULL; t++)
        for (const sf_cli_verb *v = (*t)->verbs; v != NULL && v->name != NULL; v++)
            if (strcmp(v->name, name) == 0)
                return v;
    return NULL;
}

const char *sf_kind_name(sf_kind kind)
{
    switch (kind) {
    case SF_KIND_RECEIVER:  return "receiver";
    case SF_KIND_PROCESSOR: return "processor";
    case SF_KIND_EXPORTER:  return "exporter";
    case SF_KIND_EXTENSION: return "extension";
    }
    return "component";
}

bool sf_component_type_handles(const sf_component_type *type, sf_signal signal)
{
    unsigned mask = type->signals != 0 ? type->signals : SF_SIGNALS_TRACES;

    return (mask & (1u << signal)) != 0;
}

const char *sf_component_type_signals(const sf_component_type *type)
{
    static const char *const words[8] = {
        "traces", "traces", "logs", "traces and logs", "metrics", "traces and metrics",
        "logs and metrics", "traces, logs and metrics"
    };
    unsigned mask = type->signals != 0 ? type->signals : SF_SIGNALS_TRACES;

    return words[mask & 7u];
}

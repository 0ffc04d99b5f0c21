/* sf_registry.c: the static table of component types, looked up by the type
 * name used in the YAML config (the part of an id before '/'). Adding a
 * component kind is one line here. */
#include "internal/sf_core.h"

#include <string.h>

extern const sf_component_type sf_otlp_receiver_type;
extern const sf_component_type sf_transform_processor_type;
extern const sf_component_type sf_memory_limiter_processor_type;
extern const sf_component_type sf_otlphttp_exporter_type;

const sf_component_type *const sf_registry[] = {
    &sf_otlp_receiver_type,
    &sf_transform_processor_type,
    &sf_memory_limiter_processor_type,
    &sf_otlphttp_exporter_type,
    NULL
};

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

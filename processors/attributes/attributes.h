/* processors/attributes/attributes.h: the `attributes` and `resource`
 * processors' config: upstream's list of actions (key, value, action),
 * of which spanfence runs insert, upsert, update and delete of string
 * constants (${env:} included), and refuses every other action or source
 * with a clear error. Both run as a codec edit (inserts and a keyset),
 * never on a tree. */
#ifndef SF_PROCESSORS_ATTRIBUTES_H
#define SF_PROCESSORS_ATTRIBUTES_H

#include <stdbool.h>
#include <stddef.h>

#include "sf_component.h"

/* Upstream's actions, in its order; spanfence runs the first four. */
typedef enum sf_attr_action_kind {
    SF_ATTR_INSERT = 0,     /* added when the key is absent */
    SF_ATTR_UPDATE,         /* the value replaced when the key is present */
    SF_ATTR_UPSERT,         /* replaced, or added */
    SF_ATTR_DELETE,         /* every entry of the key removed */
    SF_ATTR_HASH,           /* refused */
    SF_ATTR_EXTRACT,        /* refused */
    SF_ATTR_CONVERT         /* refused */
} sf_attr_action_kind;

typedef struct sf_attr_action {
    const char *key;
    const char *value;      /* NULL for delete */
    sf_attr_action_kind action;
    const sf_node *node;    /* the action's mapping, for messages */
} sf_attr_action;

typedef struct sf_attr_actions {
    size_t n;
    sf_attr_action *v;
} sf_attr_actions;

/* `attributes`: `actions` on span, log record and data point attributes;
 * `resource`: `attributes` on resource attributes. */
typedef struct sf_attributes_config {
    sf_attr_actions actions;
} sf_attributes_config;

extern const sf_config_row sf_attributes_config_map[];
extern const sf_config_row sf_resource_config_map[];
sf_status sf_attributes_check(sf_cfg_ctx *ctx, void *config);

/* The component types (attributes.c); the registry lists them. */
extern const sf_component_type sf_attributes_processor_type;
extern const sf_component_type sf_resource_processor_type;

#endif

/* pipeline/extensions/trace_control/trace_control_keys.c: the one loop
 * over a target's mappings (sf_tc_parse_map, trace_control.h), read by the
 * target, tls and engine_log (trace_control_config.c) and engine_metrics
 * (trace_control_latency_config.c). A file of its own so that neither of
 * those calls the other back. */
#include "trace_control.h"

#include <stdio.h>
#include <string.h>

sf_status sf_tc_parse_map(sf_cfg_ctx *ctx, const sf_node *v, const char *path,
                          const char *const *keys, size_t n_keys, sf_tc_key_fn fn, void *arg)
{
    sf_status st = SF_OK;
    char sub[256], names[256] = "";

    for (size_t w = 0; w < n_keys; w++)
        snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s", w ? ", " : "",
                 keys[w]);
    if (v->kind != SF_NODE_MAP) {
        sf_cfg_error(ctx, v, path, "expected a mapping (%s)", names);
        return SF_CONFIG;
    }
    for (size_t j = 0; j < v->n; j++) {
        const char *k = v->keys[j]->text;
        sf_status r;
        size_t w;

        snprintf(sub, sizeof(sub), "%s.%s", path, k);
        for (w = 0; w < n_keys; w++)
            if (strcmp(k, keys[w]) == 0)
                break;
        if (w < n_keys) {
            r = fn(ctx, v->items[j], sub, w, arg);
        } else {
            sf_cfg_error(ctx, v->keys[j], sub, "unknown key '%s' (expected %s)", k, names);
            r = SF_CONFIG;
        }
        if (r == SF_ENOMEM)
            return r;
        if (r != SF_OK)
            st = r;
    }
    return st;
}

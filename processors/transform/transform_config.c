/* processors/transform/transform_config.c: the `transform` processor's
 * config map and the parser of its statements (load time, not data path).
 * PLACEHOLDER: the statement parser is being written. */
#include "transform.h"

#include <stddef.h>

static sf_status parse_statements(sf_cfg_ctx *ctx, const sf_node *node, void *field)
{
    (void)field;
    sf_cfg_error(ctx, node, NULL, "statement parsing is not implemented yet");
    return SF_CONFIG;
}

const sf_config_row sf_transform_config_map[] = {
    { .key = "error_mode", .type = SF_CFG_ENUM, .def = "propagate",
      .offset = offsetof(sf_transform_config, error_mode), .choices = "propagate|ignore|silent",
      .help = "propagate drops a batch that cannot be filtered (fail closed); ignore and silent fail open" },
    { .key = "trace_statements", .type = SF_CFG_CUSTOM,
      .offset = offsetof(sf_transform_config, program), .parse = parse_statements,
      .help = "OTTL statements: keep_keys, delete_key, set(status.message, \"\")" },
    { .key = "metric_statements", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "metric_statements are not supported: spanfence handles traces only" },
    { .key = "log_statements", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "log_statements are not supported: spanfence handles traces only" },
    { 0 }
};

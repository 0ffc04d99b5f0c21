/* exporters/file/file_config.c: the `file` exporter's config map, in the
 * upstream fileexporter's layout (gzip instead of zstd; `max_lines` and
 * `queue_size` are spanfence's), and its checks: `path` is given and names
 * a file in a directory that exists. Nothing here opens the file. */
#include "file.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>

static const sf_config_row rotation_rows[] = {
    { .key = "max_megabytes", .type = SF_CFG_INT, .def = "100",
      .offset = offsetof(sf_file_rotation_config, max_megabytes), .min = 1, .max = 1048576,
      .help = "rotate before the live file would grow past this many MiB" },
    { .key = "max_days", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { .key = "max_backups", .type = SF_CFG_INT, .def = "100",
      .offset = offsetof(sf_file_rotation_config, max_backups), .min = 0, .max = 1000000,
      .help = "rotated files kept, oldest deleted first; 0 keeps all" },
    { .key = "localtime", .type = SF_CFG_BOOL, .def = "false",
      .offset = offsetof(sf_file_rotation_config, localtime),
      .help = "ignored: rotated file names always carry a UTC timestamp" },
    { 0 }
};

const sf_config_row sf_file_config_map[] = {
    { .key = "path", .type = SF_CFG_STR, .offset = offsetof(sf_file_config, path),
      .help = "file to write (created 0600); its directory must exist" },
    { .key = "format", .type = SF_CFG_ENUM, .def = "json",
      .offset = offsetof(sf_file_config, format), .choices = "json|proto",
      .help = "json: one OTLP/JSON request per line; proto: 4-byte big-endian length + protobuf" },
    { .key = "compression", .type = SF_CFG_ENUM, .def = "none",
      .offset = offsetof(sf_file_config, compression), .choices = "none|gzip", .upstream = "zstd",
      .help = "gzip: the file (and every rotated file) is a complete .gz stream" },
    { .key = "flush_interval", .type = SF_CFG_DURATION, .def = "1s",
      .offset = offsetof(sf_file_config, flush_interval), .min = 1, .max = 3600000,
      .help = "longest time written data stays in the gzip stream's buffers" },
    { .key = "rotation", .type = SF_CFG_SECTION, .offset = offsetof(sf_file_config, rotation),
      .sub = rotation_rows,
      .help = "rotate by size (only when this section is present)" },
    { .key = "max_lines", .type = SF_CFG_INT, .def = "0",
      .offset = offsetof(sf_file_config, max_lines), .min = 0, .max = INT64_MAX,
      .help = "rotate after this many requests (lines); 0 = no limit" },
    { .key = "append", .type = SF_CFG_BOOL, .def = "false",
      .offset = offsetof(sf_file_config, append),
      .help = "append to an existing file instead of truncating it at start" },
    { .key = "queue_size", .type = SF_CFG_INT, .def = "64",
      .offset = offsetof(sf_file_config, queue_size), .min = 1, .max = 1000000,
      .help = "requests waiting for the writer thread; full refuses with a retryable error" },
    { .key = "group_by", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "'group_by' is not supported: spanfence writes one file" },
    { .key = "encoding", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "'encoding' extensions are not supported: use 'format'" },
    { 0 }
};

sf_status sf_file_check(sf_cfg_ctx *ctx, void *config)
{
    sf_file_config *c = config;
    const sf_node *value = sf_cfg_value(ctx);
    const sf_node *at = sf_node_get(value, "path");
    const sf_node *rotation = sf_node_get(value, "rotation");
    const char *slash;
    struct stat st;
    char *dir;
    size_t n;

    if (c->rotation.localtime)
        sf_cfg_warn(ctx, sf_node_get(rotation, "localtime"), "rotation.localtime",
                    "'localtime' is ignored: rotated file names use UTC");
    if (c->path == NULL || c->path[0] == '\0') {
        sf_cfg_error(ctx, at ? at : sf_cfg_node(ctx), at ? "path" : NULL, "'path' is required");
        return SF_CONFIG;
    }
    if (c->path[strlen(c->path) - 1] == '/') {
        sf_cfg_error(ctx, at, "path", "'%s' names a directory, not a file", c->path);
        return SF_CONFIG;
    }
    slash = strrchr(c->path, '/');
    if (slash == NULL)
        return SF_OK;           /* the working directory */
    n = slash == c->path ? 1 : (size_t)(slash - c->path);
    dir = sf_cfg_strdup(ctx, c->path, n);
    if (dir == NULL)
        return SF_ENOMEM;
    if (stat(dir, &st) != 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            sf_cfg_error(ctx, at, "path", "directory '%s' does not exist", dir);
        else
            sf_cfg_error(ctx, at, "path", "cannot use directory '%s': errno %d", dir, errno);
        return SF_CONFIG;
    }
    if (!S_ISDIR(st.st_mode)) {
        sf_cfg_error(ctx, at, "path", "'%s' is not a directory", dir);
        return SF_CONFIG;
    }
    if (stat(c->path, &st) == 0 && S_ISDIR(st.st_mode)) {
        sf_cfg_error(ctx, at, "path", "'%s' is a directory", c->path);
        return SF_CONFIG;
    }
    return SF_OK;
}

/* exporters/file/file.h: the `file` exporter's config (upstream
 * fileexporter's layout, plus `max_lines` and `queue_size`), shared by
 * file_config.c (map and checks) and file.c (the writer). */
#ifndef SF_EXPORTERS_FILE_H
#define SF_EXPORTERS_FILE_H

#include "sf_component.h"

enum { SF_FILE_FORMAT_JSON = 0, SF_FILE_FORMAT_PROTO = 1 };
enum { SF_FILE_COMPRESSION_NONE = 0, SF_FILE_COMPRESSION_GZIP = 1 };

typedef struct sf_file_rotation_config {
    bool present;
    int64_t max_megabytes;          /* rotate before the live file would pass this */
    int64_t max_backups;            /* rotated files kept; 0 = keep all */
    bool localtime;                 /* accepted, ignored: backup names are UTC */
} sf_file_rotation_config;

typedef struct sf_file_config {
    char *path;                     /* the live file; its directory must exist */
    int format;                     /* SF_FILE_FORMAT_* */
    int compression;                /* SF_FILE_COMPRESSION_* */
    int64_t flush_interval;         /* ms */
    sf_file_rotation_config rotation;
    int64_t max_lines;              /* rotate after this many requests; 0 = no limit */
    bool append;                    /* keep what the live file holds at start */
    int64_t queue_size;             /* requests waiting for the writer thread */
} sf_file_config;

extern const sf_config_row sf_file_config_map[];
/* Cross-field checks: `path` given and its directory exists, the
 * localtime note. */
sf_status sf_file_check(sf_cfg_ctx *ctx, void *config);

#endif

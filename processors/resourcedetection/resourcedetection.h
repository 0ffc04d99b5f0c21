/* processors/resourcedetection/resourcedetection.h: the `resourcedetection`
 * processor's config, in upstream's spelling: `detectors` (env, system),
 * `override`, `timeout`, and the system detector's `hostname_sources` and
 * `resource_attributes`. What it detects at start becomes resource
 * attributes set by a codec edit, as the `resource` processor's inserts. */
#ifndef SF_PROCESSORS_RESOURCEDETECTION_H
#define SF_PROCESSORS_RESOURCEDETECTION_H

#include <stdbool.h>
#include <stddef.h>

#include "sf_component.h"

typedef enum sf_rd_detector {
    SF_RD_ENV = 0,              /* OTEL_RESOURCE_ATTRIBUTES */
    SF_RD_SYSTEM,               /* host.name, os.type, host.id */
    SF_RD_DETECTOR_COUNT
} sf_rd_detector;

typedef enum sf_rd_host_source {
    SF_RD_SOURCE_DNS = 0,       /* the host's canonical name (getaddrinfo) */
    SF_RD_SOURCE_OS,            /* gethostname() */
    SF_RD_SOURCE_COUNT
} sf_rd_host_source;

/* An ordered list of distinct values of one of the enums above. */
typedef struct sf_rd_list {
    bool given;                 /* the key was written (else the default applies) */
    size_t n;
    int v[4];
} sf_rd_list;

/* resource_attributes.<key>: {enabled: bool} */
typedef struct sf_rd_attr {
    bool present;
    bool enabled;
} sf_rd_attr;

/* The system detector's attributes upstream has and spanfence does not
 * fill: accepted only with enabled: false. */
#define SF_RD_OTHER_ATTRS 13

typedef struct sf_rd_attrs {
    bool present;
    sf_rd_attr host_name;
    sf_rd_attr host_id;
    sf_rd_attr os_type;
    sf_rd_attr other[SF_RD_OTHER_ATTRS];
} sf_rd_attrs;

typedef struct sf_rd_system_config {
    bool present;
    sf_rd_list hostname_sources;
    sf_rd_attrs resource_attributes;
} sf_rd_system_config;

typedef struct sf_resourcedetection_config {
    sf_rd_list detectors;
    bool override;              /* upsert (true) or insert (false) */
    int64_t timeout;            /* ms: the whole detection at start */
    sf_rd_system_config system;
} sf_resourcedetection_config;

extern const sf_config_row sf_resourcedetection_config_map[];
/* The upstream names of the other attributes, in sf_rd_attrs.other's order. */
extern const char *const sf_rd_other_attr_names[SF_RD_OTHER_ATTRS];
sf_status sf_resourcedetection_check(sf_cfg_ctx *ctx, void *config);

/* The detectors in effect (upstream's default, [env], when not written). */
void sf_rd_detectors(const sf_resourcedetection_config *cfg, sf_rd_list *out);
/* The hostname sources in effect (the default when not written). */
void sf_rd_hostname_sources(const sf_resourcedetection_config *cfg, sf_rd_list *out);

#endif

/* processors/resourcedetection/resourcedetection_config.c: the config map
 * of the `resourcedetection` processor (load time), in upstream's
 * spelling. The detectors spanfence has are env and system; any other
 * (ec2, gcp, docker, k8snode...) is refused by name rather than skipped, as
 * are the system detector's attributes it does not fill when enabled: a
 * config that asks for an attribute must not run without it unnoticed. */
#include "resourcedetection.h"

#include <stdio.h>
#include <string.h>

static const char *const detector_names[SF_RD_DETECTOR_COUNT] = {
    [SF_RD_ENV] = "env", [SF_RD_SYSTEM] = "system",
};

static const char *const source_names[SF_RD_SOURCE_COUNT] = {
    [SF_RD_SOURCE_DNS] = "dns", [SF_RD_SOURCE_OS] = "os",
};

const char *const sf_rd_other_attr_names[SF_RD_OTHER_ATTRS] = {
    "host.arch", "host.cpu.cache.l2.size", "host.cpu.family", "host.cpu.model.id",
    "host.cpu.model.name", "host.cpu.stepping", "host.cpu.vendor.id", "host.ip", "host.mac",
    "os.description", "os.version", "os.name", "os.build.id",
};

/* A list of distinct names out of `names` (n of them) into *out; `what`
 * names the list's items in messages, `hint` what else upstream has. */
static sf_status parse_list(sf_cfg_ctx *ctx, const sf_node *node, sf_rd_list *out,
                            const char *const *names, int n, const char *what, const char *hint)
{
    int errors = 0;
    char sub[32];

    memset(out, 0, sizeof(*out));
    out->given = true;
    if (node->kind == SF_NODE_SCALAR && node->is_null)
        return SF_OK;
    if (node->kind != SF_NODE_SEQ) {
        sf_cfg_error(ctx, node, NULL, "expected a list of %s", what);
        return SF_CONFIG;
    }
    for (size_t i = 0; i < node->n; i++) {
        const sf_node *it = node->items[i];
        int found = -1;

        snprintf(sub, sizeof(sub), "[%zu]", i);
        if (it->kind != SF_NODE_SCALAR) {
            sf_cfg_error(ctx, it, sub, "expected the name of a %s", what);
            errors++;
            continue;
        }
        for (int k = 0; k < n; k++)
            if (strcmp(it->text, names[k]) == 0)
                found = k;
        if (found < 0) {
            sf_cfg_error(ctx, it, sub, "%s '%s' is not supported by spanfence (%s)", what,
                         it->text, hint);
            errors++;
            continue;
        }
        for (size_t j = 0; j < out->n; j++) {
            if (out->v[j] == found) {
                sf_cfg_error(ctx, it, sub, "%s '%s' is listed twice", what, it->text);
                errors++;
                found = -1;
                break;
            }
        }
        if (found >= 0 && out->n < sizeof(out->v) / sizeof(out->v[0]))
            out->v[out->n++] = found;
    }
    return errors ? SF_CONFIG : SF_OK;
}

static sf_status parse_detectors(sf_cfg_ctx *ctx, const sf_node *node, void *field)
{
    return parse_list(ctx, node, field, detector_names, SF_RD_DETECTOR_COUNT, "detector",
                      "it has env and system; add cloud attributes at the gateway");
}

static sf_status parse_sources(sf_cfg_ctx *ctx, const sf_node *node, void *field)
{
    return parse_list(ctx, node, field, source_names, SF_RD_SOURCE_COUNT, "hostname source",
                      "it has dns and os");
}

void sf_rd_detectors(const sf_resourcedetection_config *cfg, sf_rd_list *out)
{
    if (cfg->detectors.given) {
        *out = cfg->detectors;
        return;
    }
    *out = (sf_rd_list){ .given = false, .n = 1, .v = { SF_RD_ENV } };  /* upstream's */
}

void sf_rd_hostname_sources(const sf_resourcedetection_config *cfg, sf_rd_list *out)
{
    if (cfg->system.hostname_sources.given) {
        *out = cfg->system.hostname_sources;
        return;
    }
    /* upstream's default: the FQDN, else the OS's name */
    *out = (sf_rd_list){ .given = false, .n = 2, .v = { SF_RD_SOURCE_DNS, SF_RD_SOURCE_OS } };
}

static const sf_config_row attr_on_rows[] = {
    { .key = "enabled", .type = SF_CFG_BOOL, .def = "true", .offset = offsetof(sf_rd_attr, enabled),
      .help = "whether the detector sets the attribute" },
    { 0 }
};

static const sf_config_row attr_off_rows[] = {
    { .key = "enabled", .type = SF_CFG_BOOL, .def = "false",
      .offset = offsetof(sf_rd_attr, enabled), .help = "whether the detector sets the attribute" },
    { 0 }
};

static const sf_config_row attrs_rows[] = {
    { .key = "host.name", .type = SF_CFG_SECTION, .offset = offsetof(sf_rd_attrs, host_name),
      .sub = attr_on_rows, .help = "the host's name, from hostname_sources (default: enabled)" },
    { .key = "os.type", .type = SF_CFG_SECTION, .offset = offsetof(sf_rd_attrs, os_type),
      .sub = attr_on_rows, .help = "\"linux\" (default: enabled)" },
    { .key = "host.id", .type = SF_CFG_SECTION, .offset = offsetof(sf_rd_attrs, host_id),
      .sub = attr_off_rows, .help = "the machine id from /etc/machine-id (default: disabled)" },
    { .key = "host.arch", .type = SF_CFG_SECTION, .offset = offsetof(sf_rd_attrs, other[0]),
      .sub = attr_off_rows, .help = "not filled by spanfence: only enabled: false" },
    { .key = "host.cpu.cache.l2.size", .type = SF_CFG_SECTION,
      .offset = offsetof(sf_rd_attrs, other[1]), .sub = attr_off_rows,
      .help = "not filled by spanfence: only enabled: false" },
    { .key = "host.cpu.family", .type = SF_CFG_SECTION, .offset = offsetof(sf_rd_attrs, other[2]),
      .sub = attr_off_rows, .help = "not filled by spanfence: only enabled: false" },
    { .key = "host.cpu.model.id", .type = SF_CFG_SECTION,
      .offset = offsetof(sf_rd_attrs, other[3]), .sub = attr_off_rows,
      .help = "not filled by spanfence: only enabled: false" },
    { .key = "host.cpu.model.name", .type = SF_CFG_SECTION,
      .offset = offsetof(sf_rd_attrs, other[4]), .sub = attr_off_rows,
      .help = "not filled by spanfence: only enabled: false" },
    { .key = "host.cpu.stepping", .type = SF_CFG_SECTION,
      .offset = offsetof(sf_rd_attrs, other[5]), .sub = attr_off_rows,
      .help = "not filled by spanfence: only enabled: false" },
    { .key = "host.cpu.vendor.id", .type = SF_CFG_SECTION,
      .offset = offsetof(sf_rd_attrs, other[6]), .sub = attr_off_rows,
      .help = "not filled by spanfence: only enabled: false" },
    { .key = "host.ip", .type = SF_CFG_SECTION, .offset = offsetof(sf_rd_attrs, other[7]),
      .sub = attr_off_rows, .help = "not filled by spanfence: only enabled: false" },
    { .key = "host.mac", .type = SF_CFG_SECTION, .offset = offsetof(sf_rd_attrs, other[8]),
      .sub = attr_off_rows, .help = "not filled by spanfence: only enabled: false" },
    { .key = "os.description", .type = SF_CFG_SECTION, .offset = offsetof(sf_rd_attrs, other[9]),
      .sub = attr_off_rows, .help = "not filled by spanfence: only enabled: false" },
    { .key = "os.version", .type = SF_CFG_SECTION, .offset = offsetof(sf_rd_attrs, other[10]),
      .sub = attr_off_rows, .help = "not filled by spanfence: only enabled: false" },
    { .key = "os.name", .type = SF_CFG_SECTION, .offset = offsetof(sf_rd_attrs, other[11]),
      .sub = attr_off_rows, .help = "not filled by spanfence: only enabled: false" },
    { .key = "os.build.id", .type = SF_CFG_SECTION, .offset = offsetof(sf_rd_attrs, other[12]),
      .sub = attr_off_rows, .help = "not filled by spanfence: only enabled: false" },
    { 0 }
};

static const sf_config_row system_rows[] = {
    { .key = "hostname_sources", .type = SF_CFG_CUSTOM,
      .offset = offsetof(sf_rd_system_config, hostname_sources), .parse = parse_sources,
      .help = "where host.name comes from, the first that answers: dns (the canonical name), "
              "os (gethostname); default [dns, os]" },
    { .key = "resource_attributes", .type = SF_CFG_SECTION,
      .offset = offsetof(sf_rd_system_config, resource_attributes), .sub = attrs_rows,
      .help = "{host.name|os.type|host.id: {enabled: bool}}" },
    { 0 }
};

const sf_config_row sf_resourcedetection_config_map[] = {
    { .key = "detectors", .type = SF_CFG_CUSTOM,
      .offset = offsetof(sf_resourcedetection_config, detectors), .parse = parse_detectors,
      .help = "detectors run once at start, in order (the first to set a key wins): env "
              "(OTEL_RESOURCE_ATTRIBUTES), system (host.name, os.type, host.id); default "
              "[env]" },
    { .key = "override", .type = SF_CFG_BOOL, .def = "true",
      .offset = offsetof(sf_resourcedetection_config, override),
      .help = "replace a resource attribute the data already has (false: keep it)" },
    { .key = "timeout", .type = SF_CFG_DURATION, .def = "5s",
      .offset = offsetof(sf_resourcedetection_config, timeout),
      .help = "longest the detection at start may take (a dns lookup past it is given up)",
      .min = 1, .max = 600000 },
    { .key = "system", .type = SF_CFG_SECTION,
      .offset = offsetof(sf_resourcedetection_config, system), .sub = system_rows,
      .help = "the system detector's settings" },
    { .key = "attributes", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "'attributes' is not supported (deprecated upstream): choose attributes with "
              "system.resource_attributes" },
    { .key = "refresh_interval", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD,
      .help = "spanfence detects once, at start (and at each reload)" },
    { 0 }
};

sf_status sf_resourcedetection_check(sf_cfg_ctx *ctx, void *config)
{
    const sf_resourcedetection_config *cfg = config;
    const sf_node *v = sf_cfg_value(ctx);
    const sf_node *sys = v != NULL ? sf_node_get(v, "system") : NULL;
    const sf_node *ra = sys != NULL ? sf_node_get(sys, "resource_attributes") : NULL;
    int errors = 0;
    char path[96];

    if (cfg->detectors.given && cfg->detectors.n == 0) {
        sf_cfg_error(ctx, sf_node_get(v, "detectors"), "detectors",
                     "at least one detector is required (env, system)");
        errors++;
    }
    for (int i = 0; i < SF_RD_OTHER_ATTRS; i++) {
        if (!cfg->system.resource_attributes.other[i].enabled)
            continue;
        snprintf(path, sizeof(path), "system.resource_attributes.%s", sf_rd_other_attr_names[i]);
        sf_cfg_error(ctx, ra != NULL && sf_node_get(ra, sf_rd_other_attr_names[i]) != NULL
                              ? sf_node_get(ra, sf_rd_other_attr_names[i]) : sf_cfg_node(ctx),
                     path, "'%s' is not supported by spanfence: its system detector sets "
                     "host.name, os.type and host.id", sf_rd_other_attr_names[i]);
        errors++;
    }
    return errors ? SF_CONFIG : SF_OK;
}

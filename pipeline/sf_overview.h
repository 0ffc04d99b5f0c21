/* sf_overview.h: the collector at a glance, as one JSON document (json-c):
 * what leaves (pipelines, exporters), spans accepted / refused / dropped /
 * exported / queued by component and reason, each extension's own part
 * (trace_control: every target's level and window with live counts and
 * time left), the digest of each processor's allowlist, the policy the
 * config holds, and the last reload's result. Served as GET /status on the
 * metrics endpoint; read by `spanfence status` and the STATUS= line. */
#ifndef SF_OVERVIEW_H
#define SF_OVERVIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sf_config.h"
#include "sf_status.h"

struct json_object;
struct sf_component;

/* A reload ended: taken (ok) or not, with the reason. Process-wide (it
 * outlives the services a reload replaces); any thread. */
void sf_overview_note_reload(bool ok, const char *message);

/* The config sources running (--config and --set, as the log names them)
 * and the --policy they hold (NULL: none); at start and after a reload
 * that took. Process-wide; any thread. */
void sf_overview_note_config(const char *sources, const char *policy);

/* Spans accepted, exported and lost in the last `ms` (about a minute:
 * the main loop's STATUS= samples); any thread. */
void sf_overview_note_recent(int64_t ms, uint64_t accepted, uint64_t exported, uint64_t lost);

/* The document for these components (the retired ones' counts are in the
 * totals), or NULL for want of memory; the caller puts it. */
struct json_object *sf_overview_build(struct sf_component *components, size_t n,
                                      struct sf_component *retired, size_t n_retired,
                                      const sf_config *cfg);

#endif

/* sf_overview.h: the collector at a glance, as one JSON document (json-c):
 * what leaves (pipelines, exporters), spans accepted / refused / dropped /
 * exported / queued by component and reason, each extension's own part
 * (trace_control: every target's level and window with live counts and
 * time left), the digest of each processor's allowlist, the policy the
 * config holds, and the last reload's result. Served as GET /status on the
 * metrics endpoint; read by `spanfence status` and the STATUS= line. */
#ifndef SF_OVERVIEW_H
#define SF_OVERVIEW_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sf_config.h"
#include "sf_status.h"

struct json_object;
struct sf_component;

/* What the command knows that outlives the services a reload replaces:
 * the last reload's result, the config sources and policy running, and
 * the recent counts. The command owns one (SF_HISTORY_INIT) and hands it to
 * each service it makes (sf_service_set_history); the notes below may come
 * from any thread. */
typedef struct sf_history {
    pthread_mutex_t mu;
    unsigned long count;            /* reloads */
    bool ok;                        /* the last one took */
    int64_t wall_ms;                /* when it ended */
    char message[512];
    int64_t recent_ms;              /* what the recent counts cover (0: none yet) */
    uint64_t recent[3];             /* accepted, exported, lost in recent_ms */
    char sources[1024];             /* the --config/--set sources running, "" unknown */
    char policy[1024];              /* the --policy the running config holds, "" none */
} sf_history;

#define SF_HISTORY_INIT { .mu = PTHREAD_MUTEX_INITIALIZER }

/* A reload ended: taken (ok) or not, with the reason. */
void sf_history_note_reload(sf_history *h, bool ok, const char *message);

/* The config sources running (--config and --set, as the log names them)
 * and the --policy they hold (NULL: none); at start and after a reload
 * that took. */
void sf_history_note_config(sf_history *h, const char *sources, const char *policy);

/* Spans accepted, exported and lost in the last `ms` (about a minute:
 * the main loop's STATUS= samples). */
void sf_history_note_recent(sf_history *h, int64_t ms, uint64_t accepted, uint64_t exported,
                            uint64_t lost);

/* The document for these components (the retired ones' counts are in the
 * totals) and `history` (NULL: no reload, sources or recent counts known),
 * or NULL for want of memory; the caller puts it. */
struct json_object *sf_overview_build(struct sf_component *components, size_t n,
                                      struct sf_component *retired, size_t n_retired,
                                      const sf_config *cfg, sf_history *history);

#endif

/* pipeline/extensions/trace_control/trace_control_audit.c: the audit
 * records the collector writes (built here, appended by sf_tc_audit_append),
 * and the pending ones kept in order while the log cannot be written. */
#define _GNU_SOURCE
#include "trace_control_int.h"
#include "sf_time.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- audit records ------------------------------------------------------------ */

void sf_tc_add(char *buf, size_t size, size_t *len, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (*len >= size)
        return;
    va_start(ap, fmt);
    n = vsnprintf(buf + *len, size - *len, fmt, ap);
    va_end(ap);
    if (n > 0)
        *len += (size_t)n;
}

void sf_tc_add_reasons(char *buf, size_t size, size_t *len, const char *name,
                        const uint64_t *now, const uint64_t *then)
{
    sf_tc_add(buf, size, len, ",\"%s\":{", name);
    for (int r = 0; r < SF_REASON_COUNT; r++)
        sf_tc_add(buf, size, len, "%s\"%s\":%" PRIu64, r ? "," : "", sf_reason_label((sf_reason)r),
            now[r] - then[r]);
    sf_tc_add(buf, size, len, "}");
}

/* ,"status":N,"error":"..." of an engine's answer (no header is in it). */
void sf_tc_add_answer(char *buf, size_t size, size_t *len, long status, const char *detail)
{
    char esc[sizeof(((sf_tc_answer *)0)->detail) * 6 + 1];

    sf_json_escape(detail, esc, sizeof(esc));
    if (status != 0)
        sf_tc_add(buf, size, len, ",\"status\":%ld", status);
    sf_tc_add(buf, size, len, ",\"error\":\"%s\"", esc);
}

void sf_tc_audit_set_gauge(tc_ctx *x)
{
    atomic_store(&sf_component_counters(x->self)->values[TC_AUDIT_PENDING], (int64_t)x->n_pending);
}

/* Write the pending records in order; SF_OK when none is left. */
sf_status sf_tc_audit_flush(tc_ctx *x)
{
    size_t done = 0;

    while (done < x->n_pending &&
           sf_tc_audit_append(x->cfg->audit_log, x->pending[done]) == SF_OK)
        sf_free(x->pending[done++]);
    if (done > 0) {
        memmove(x->pending, x->pending + done, (x->n_pending - done) * sizeof(*x->pending));
        x->n_pending -= done;
        if (x->n_pending == 0 && x->audit_delay != 0)     /* after a failure */
            sf_info("trace_control: the audit log '%s' is written again; no record pending",
                    x->cfg->audit_log);
        if (x->n_pending == 0)
            x->audit_delay = 0;
    }
    sf_tc_audit_set_gauge(x);
    if (x->n_pending == 0)
        return SF_OK;
    if (x->audit_delay == 0)
        x->audit_delay = x->cfg->retry.initial_interval;
    else
        x->audit_delay = x->audit_delay * 2 > x->cfg->retry.max_interval
                             ? x->cfg->retry.max_interval : x->audit_delay * 2;
    x->audit_retry_mono = sf_now_ms() + x->audit_delay;
    return SF_IO;
}

/* Append `record` after the pending ones and write them all. When it cannot
 * be written now it stays pending (retried) and is logged whole, so the
 * record is in the collector's log whatever happens; SF_IO then. */
sf_status sf_tc_audit(tc_ctx *x, const char *record)
{
    char **p = sf_realloc(x->pending, (x->n_pending + 1) * sizeof(*p));
    char *copy = sf_strdup(record);

    if (p != NULL)
        x->pending = p;
    if (p == NULL || copy == NULL) {
        sf_free(copy);
        sf_error("trace_control: audit record NOT written (out of memory): %s", record);
        return SF_ENOMEM;
    }
    x->pending[x->n_pending++] = copy;
    if (sf_tc_audit_flush(x) == SF_OK)
        return SF_OK;
    sf_error("trace_control: audit record not written yet (%zu pending, retried in %" PRId64
             " ms): %s", x->n_pending, x->audit_delay, record);
    return SF_IO;
}

void sf_tc_audit_free_pending(tc_ctx *x)
{
    for (size_t i = 0; i < x->n_pending; i++)
        sf_free(x->pending[i]);
    sf_free(x->pending);
    x->pending = NULL;
    x->n_pending = 0;
}

/* The "open" record is written at once or not at all: when it (or an
 * older pending record) cannot be written, nothing is changed. */
sf_status sf_tc_audit_open(tc_ctx *x, const tc_window *w)
{
    char rec[TC_RECORD_MAX], t0[32], t1[32];

    sf_time_format_utc(w->start_wall, t0, sizeof(t0));
    sf_time_format_utc(w->end_wall, t1, sizeof(t1));
    snprintf(rec, sizeof(rec),
             "{\"event\":\"open\",\"window\":\"%s\",\"target\":\"%s\",\"level\":%" PRId64
             ",\"uid\":%u,\"reason\":\"%s\",\"start\":\"%s\",\"planned_end\":\"%s\"}",
             w->id, w->target->id, w->level, w->uid, w->reason, t0, t1);
    if (sf_tc_audit_flush(x) != SF_OK)
        return SF_IO;
    return sf_tc_audit_append(x->cfg->audit_log, rec);
}

/* ,"target_scope":"match","match":{...},"accepted_from_target":N,
 * "refused_from_target":M: the spans of the window's own engine. */
void sf_tc_add_target_counts(char *buf, size_t size, size_t *len, const tc_window *w,
                              const tc_counts *c)
{
    const sf_strmap *m = &w->target->match;
    char k[SF_TC_MAX_MATCH_LEN * 6 + 1], v[SF_TC_MAX_MATCH_LEN * 6 + 1];

    sf_tc_add(buf, size, len, ",\"target_scope\":\"match\",\"match\":{");
    for (size_t i = 0; i < m->n; i++) {
        sf_json_escape(m->keys[i], k, sizeof(k));
        sf_json_escape(m->values[i], v, sizeof(v));
        sf_tc_add(buf, size, len, "%s\"%s\":\"%s\"", i ? "," : "", k, v);
    }
    sf_tc_add(buf, size, len, "},\"accepted_from_target\":%" PRIu64 ",\"refused_from_target\":%"
        PRIu64, c->from_target[0], c->from_target[1]);
}

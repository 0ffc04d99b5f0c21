/* pipeline/extensions/trace_control/trace_control_audit.c: the audit
 * records the collector writes (built with json-c, appended by
 * sf_tc_audit_append),
 * and the pending ones kept in order while the log cannot be written. */
#define _GNU_SOURCE
#include "trace_control_int.h"
#include "sf_time.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <pwd.h>
#include <string.h>

#include <json-c/json.h>

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
    json_object *o = sf_tc_record_new("open", w->id, w->target->id);
    struct passwd pw, *found = NULL;
    char pwbuf[1024];
    char *rec;
    sf_status st;

    if (o != NULL) {
        json_object_object_add(o, "level", json_object_new_int64(w->level));
        json_object_object_add(o, "uid", json_object_new_int64(w->uid));
        /* the peer's uid (SO_PEERCRED) and its name now, for the reader */
        if (getpwuid_r(w->uid, &pw, pwbuf, sizeof(pwbuf), &found) == 0 && found != NULL)
            json_object_object_add(o, "user", json_object_new_string(found->pw_name));
        json_object_object_add(o, "reason", json_object_new_string(w->reason));
        sf_tc_record_time(o, "start", w->start_wall);
        sf_tc_record_time(o, "planned_end", w->end_wall);
    }
    rec = sf_tc_record_text(o);
    if (rec == NULL)
        return SF_ENOMEM;
    st = sf_tc_audit_flush(x) != SF_OK ? SF_IO : sf_tc_audit_append(x->cfg->audit_log, rec);
    sf_free(rec);
    return st;
}

sf_status sf_tc_audit_record(tc_ctx *x, json_object *rec)
{
    char *text = sf_tc_record_text(rec);
    sf_status st;

    if (text == NULL) {
        sf_error("trace_control: audit record NOT written (out of memory)");
        return SF_ENOMEM;
    }
    st = sf_tc_audit(x, text);
    sf_free(text);
    return st;
}

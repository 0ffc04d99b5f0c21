/* pipeline/extensions/trace_control/trace_control_recovery.c: crash
 * recovery: at start, every window the audit log says is still open is
 * closed and its engine reset. */
#define _GNU_SOURCE
#include "trace_control_int.h"
#include "sf_time.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- crash recovery ------------------------------------------------------------------------ */

/* Read the audit log: every target whose last "open" has no "reset",
 * "reset_failed" or refused "close" was left at a raised level by a
 * process that died; schedule its reset. */
sf_status sf_tc_recover(tc_ctx *x)
{
    FILE *f = fopen(x->cfg->audit_log, "re");
    char *line;

    if (f == NULL)
        return errno == ENOENT ? SF_OK : SF_IO;
    line = sf_malloc(TC_LINE_MAX);
    if (line == NULL) {
        fclose(f);
        return SF_ENOMEM;
    }
    while (fgets(line, TC_LINE_MAX, f) != NULL) {
        char ev[16], target[65], id[128], cause[16], reason[SF_TC_MAX_REASON + 1];
        size_t len = strlen(line);
        tc_window *w;
        int64_t v = 0;

        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (sf_tc_json_str(line, len, "event", ev, sizeof(ev)) != SF_OK ||
            sf_tc_json_str(line, len, "target", target, sizeof(target)) != SF_OK ||
            sf_tc_json_str(line, len, "window", id, sizeof(id)) != SF_OK)
            continue;
        w = sf_tc_window_of(x, target);
        if (w == NULL || w->carried)
            continue;
        if (strcmp(ev, "open") == 0) {
            const char *dash = strrchr(id, '-');

            w->state = TC_RESETTING;
            w->level = sf_tc_json_int(line, len, "level", &v) == SF_OK ? v : 0;
            w->uid = sf_tc_json_int(line, len, "uid", &v) == SF_OK ? (unsigned)v : 0;
            if (sf_tc_json_str(line, len, "reason", reason, sizeof(reason)) == SF_OK)
                snprintf(w->reason, sizeof(w->reason), "%s", reason);
            w->start_wall = dash ? strtoll(dash + 1, NULL, 10) : 0;
            w->end_wall = w->start_wall;
            snprintf(w->id, sizeof(w->id), "%s", id);
        } else if (strcmp(w->id, id) == 0 &&
                   (strcmp(ev, "reset") == 0 || strcmp(ev, "reset_failed") == 0 ||
                    (strcmp(ev, "close") == 0 &&
                     sf_tc_json_str(line, len, "cause", cause, sizeof(cause)) == SF_OK &&
                     strcmp(cause, "set_refused") == 0))) {
            w->state = TC_IDLE;
        }
    }
    fclose(f);
    sf_free(line);
    for (size_t i = 0; i < x->cfg->targets.n; i++) {
        tc_window *w = &x->w[i];

        if (w->state != TC_RESETTING || w->carried)
            continue;
        sf_warn("trace_control: window '%s' on target '%s' was left open by a previous run; "
                "resetting it", w->id, w->target->id);
        w->state = TC_IDLE;
        w->ended_wall = sf_wall_ms();
        w->grace_ms = 0;
        snprintf(w->cause, sizeof(w->cause), "recovered");
        w->note[0] = '\0';
        sf_tc_window_close(x, w, 0);
        sf_tc_engine_begin_reset(x, w);
    }
    return SF_OK;
}

/* sf_diag.c: the config loader's diagnostics: every error and warning of one
 * load, formatted "FILE:LINE:COL: path: message" when recorded and kept in
 * file order, so a run reports all problems at once, sorted by position.
 * Identical messages (an anchored node reached twice) are kept once. */
#include "internal/sf_config_int.h"
#include "sf_alloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct sf_diag_msg {
    int source;                 /* sorted by (source, line, col) */
    int line, col;
    bool warning;
    char *text;
} sf_diag_msg;

struct sf_diag {
    char *file;
    int source;                 /* index of `file` among merged sources */
    size_t n, cap;
    sf_diag_msg *msgs;          /* sorted by (line, col), stable */
    size_t errors, warnings;    /* counted even when a message could not be stored */
    bool oom;
};

sf_diag *sf_diag_create(const char *file)
{
    sf_diag *d = sf_calloc(1, sizeof(*d));

    if (d == NULL)
        return NULL;
    d->file = sf_strdup(file ? file : "");
    if (d->file == NULL) {
        sf_free(d);
        return NULL;
    }
    return d;
}

void sf_diag_destroy(sf_diag *d)
{
    if (d == NULL)
        return;
    for (size_t i = 0; i < d->n; i++)
        sf_free(d->msgs[i].text);
    sf_free(d->msgs);
    sf_free(d->file);
    sf_free(d);
}

sf_status sf_diag_set_file(sf_diag *d, const char *file)
{
    char *copy = sf_strdup(file ? file : "");

    if (copy == NULL)
        return SF_ENOMEM;
    sf_free(d->file);
    d->file = copy;
    return SF_OK;
}

sf_status sf_diag_set_source(sf_diag *d, const char *file, int source)
{
    sf_status st = sf_diag_set_file(d, file);

    if (st == SF_OK)
        d->source = source;
    return st;
}

const char *sf_diag_file(const sf_diag *d)
{
    return d->file;
}

int sf_diag_source(const sf_diag *d)
{
    return d->source;
}

bool sf_diag_oom(const sf_diag *d)
{
    return d->oom;
}

static void record(sf_diag *d, const char *file, int source, int line, int col, bool warning,
                   const char *path, const char *fmt, va_list ap)
{
    char msg[1024], prefix[64];
    char *text;
    size_t at;
    int len;

    if (warning)
        d->warnings++;
    else
        d->errors++;
    vsnprintf(msg, sizeof(msg), fmt, ap);
    if (line > 0)
        snprintf(prefix, sizeof(prefix), ":%d:%d", line, col);
    else
        prefix[0] = '\0';
    if (file == NULL) {
        file = d->file;
        source = d->source;
    }
    len = snprintf(NULL, 0, "%s%s: %s%s%s%s", file, prefix, path && *path ? path : "",
                   path && *path ? ": " : "", warning ? "warning: " : "", msg);
    text = sf_malloc((size_t)len + 1);
    if (text == NULL)
        goto out_oom;
    snprintf(text, (size_t)len + 1, "%s%s: %s%s%s%s", file, prefix, path && *path ? path : "",
             path && *path ? ": " : "", warning ? "warning: " : "", msg);
    for (size_t i = 0; i < d->n; i++) {
        if (strcmp(d->msgs[i].text, text) == 0) {
            if (warning)
                d->warnings--;
            else
                d->errors--;
            sf_free(text);
            return;
        }
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 16;
        sf_diag_msg *m = sf_realloc(d->msgs, cap * sizeof(*m));

        if (m == NULL)
            goto out_free_text;
        d->msgs = m;
        d->cap = cap;
    }
    at = d->n;
    while (at > 0 && (d->msgs[at - 1].source > source ||
                      (d->msgs[at - 1].source == source &&
                       (d->msgs[at - 1].line > line ||
                        (d->msgs[at - 1].line == line && d->msgs[at - 1].col > col)))))
        at--;
    memmove(&d->msgs[at + 1], &d->msgs[at], (d->n - at) * sizeof(*d->msgs));
    d->msgs[at] = (sf_diag_msg){ .source = source, .line = line, .col = col,
                                 .warning = warning, .text = text };
    d->n++;
    return;

out_free_text:
    sf_free(text);
out_oom:
    d->oom = true;
}

/* A message at a YAML node's place (none when `at` is NULL). */
static void record_at_node(sf_diag *d, const sf_node *at, bool warning, const char *path,
                           const char *fmt, va_list ap)
{
    record(d, at ? at->file : NULL, at ? at->source : 0, at ? at->line : 0, at ? at->col : 0,
           warning, path, fmt, ap);
}

void sf_diag_error(sf_diag *d, const sf_node *at, const char *path, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    record_at_node(d, at, false, path, fmt, ap);
    va_end(ap);
}

void sf_diag_warn(sf_diag *d, const sf_node *at, const char *path, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    record_at_node(d, at, true, path, fmt, ap);
    va_end(ap);
}

void sf_diag_error_at(sf_diag *d, int line, int col, const char *path, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    record(d, NULL, 0, line, col, false, path, fmt, ap);
    va_end(ap);
}

size_t sf_diag_errors(const sf_diag *d)
{
    return d->errors;
}

size_t sf_diag_warnings(const sf_diag *d)
{
    return d->warnings;
}

size_t sf_diag_count(const sf_diag *d)
{
    return d->n;
}

const char *sf_diag_message(const sf_diag *d, size_t i)
{
    return i < d->n ? d->msgs[i].text : NULL;
}

void sf_diag_print(const sf_diag *d)
{
    for (size_t i = 0; i < d->n; i++)
        fprintf(stderr, "%s\n", d->msgs[i].text);
    if (d->oom)
        fprintf(stderr, "%s: out of memory: some messages were lost\n", d->file);
}

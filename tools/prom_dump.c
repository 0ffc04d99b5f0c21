/* tools/prom_dump.c: what the prometheus receiver's exposition parser
 * (receivers/prometheus/prom_parse.c) reads from a file, as one JSON
 * document on stdout, for the differential test against prometheus_client
 * (tests/receivers/prom_differential.py) and for people.
 *
 *   prom_dump [--openmetrics] [--sample-limit N] [--label-limit N]
 *             [--max-line N] [--label-name-length N] [--label-value-length N] FILE
 *
 * {"ok": true, "families": [{"name", "type", "help", "unit", "samples":
 *   [{"name", "labels": {...}, "value": "1.5" | "NaN" | "+Inf" | "-Inf",
 *     "timestamp_ms": N | null, "duplicate": bool}]}], "duplicates": N,
 *  "exemplars": N}
 * or {"ok": false, "reason": "malformed", "error": "line 3: ..."}. Exit 0
 * either way; 2 on bad usage or an unreadable file. */
#include "receivers/prometheus/prom_parse.h"

#include "sf_arena.h"

#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_object *value_json(double v)
{
    char buf[40];

    if (isnan(v))
        return json_object_new_string("NaN");
    if (isinf(v))
        return json_object_new_string(v > 0 ? "+Inf" : "-Inf");
    snprintf(buf, sizeof(buf), "%.17g", v);
    return json_object_new_string(buf);
}

int main(int argc, char **argv)
{
    sf_prom_limits lim = { .max_line = 1 << 20, .sample_limit = 0, .label_limit = 0 };
    sf_prom_format fmt = SF_PROM_TEXT;
    const char *path = NULL;
    sf_prom_result res;
    json_object *doc, *fams;
    sf_arena *arena;
    FILE *f;
    char *data = NULL;
    size_t len = 0, cap = 0;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--openmetrics") == 0)
            fmt = SF_PROM_OPENMETRICS;
        else if (i + 1 < argc && strcmp(argv[i], "--sample-limit") == 0)
            lim.sample_limit = strtoul(argv[++i], NULL, 10);
        else if (i + 1 < argc && strcmp(argv[i], "--label-limit") == 0)
            lim.label_limit = strtoul(argv[++i], NULL, 10);
        else if (i + 1 < argc && strcmp(argv[i], "--max-line") == 0)
            lim.max_line = strtoul(argv[++i], NULL, 10);
        else if (i + 1 < argc && strcmp(argv[i], "--label-name-length") == 0)
            lim.label_name_length = strtoul(argv[++i], NULL, 10);
        else if (i + 1 < argc && strcmp(argv[i], "--label-value-length") == 0)
            lim.label_value_length = strtoul(argv[++i], NULL, 10);
        else if (argv[i][0] != '-' && path == NULL)
            path = argv[i];
        else {
            fprintf(stderr, "usage: prom_dump [--openmetrics] [--sample-limit N] "
                    "[--label-limit N] [--max-line N] [--label-name-length N] "
                    "[--label-value-length N] FILE\n");
            return 2;
        }
    }
    if (path == NULL || (f = fopen(path, "rb")) == NULL) {
        fprintf(stderr, "prom_dump: cannot read %s\n", path ? path : "(no file)");
        return 2;
    }
    for (;;) {
        size_t n;

        if (len == cap) {
            cap = cap ? cap * 2 : 65536;
            data = realloc(data, cap);
            if (data == NULL)
                return 2;
        }
        n = fread(data + len, 1, cap - len, f);
        if (n == 0)
            break;
        len += n;
    }
    fclose(f);
    arena = sf_arena_create(1 << 20, 0);
    if (arena == NULL)
        return 2;
    sf_prom_parse((const uint8_t *)data, len, fmt, &lim, arena, &res);
    doc = json_object_new_object();
    if (res.err != SF_PROM_ERR_OK) {
        json_object_object_add(doc, "ok", json_object_new_boolean(0));
        json_object_object_add(doc, "reason", json_object_new_string(sf_prom_err_label(res.err)));
        json_object_object_add(doc, "error", json_object_new_string(res.err_text));
    } else {
        json_object_object_add(doc, "ok", json_object_new_boolean(1));
        fams = json_object_new_array();
        for (size_t fi = 0; fi < res.n_families; fi++) {
            const sf_prom_family *fam = &res.families[fi];
            json_object *jf = json_object_new_object(), *js = json_object_new_array();

            json_object_object_add(jf, "name", json_object_new_string(fam->name));
            json_object_object_add(jf, "type", json_object_new_string(sf_prom_type_name(fam->type)));
            json_object_object_add(jf, "help", json_object_new_string(fam->help));
            json_object_object_add(jf, "unit", json_object_new_string(fam->unit));
            for (size_t si = 0; si < res.n_samples; si++) {
                const sf_prom_sample *s = &res.samples[si];
                json_object *jsm, *jl;

                if (s->family != fi)
                    continue;
                jsm = json_object_new_object();
                jl = json_object_new_object();
                json_object_object_add(jsm, "name", json_object_new_string(s->name));
                for (uint16_t k = 0; k < s->n_labels; k++)
                    json_object_object_add(jl, s->labels[k].name,
                                           json_object_new_string_len(s->labels[k].value,
                                                                      (int)s->labels[k].value_len));
                json_object_object_add(jsm, "labels", jl);
                json_object_object_add(jsm, "value", value_json(s->value));
                json_object_object_add(jsm, "timestamp_ms",
                                       s->has_ts ? json_object_new_int64(s->ts_ms) : NULL);
                json_object_object_add(jsm, "duplicate", json_object_new_boolean(s->duplicate));
                json_object_array_add(js, jsm);
            }
            json_object_object_add(jf, "samples", js);
            json_object_array_add(fams, jf);
        }
        json_object_object_add(doc, "families", fams);
        json_object_object_add(doc, "duplicates", json_object_new_int64((int64_t)res.duplicates));
        json_object_object_add(doc, "exemplars", json_object_new_int64((int64_t)res.exemplars));
    }
    puts(json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN));
    json_object_put(doc);
    sf_arena_destroy(arena);
    free(data);
    return 0;
}

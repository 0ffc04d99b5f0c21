/* sf_overview.c: the collector at a glance (sf_overview.h), built with
 * json-c from the same counters /metrics renders, and the command's
 * history (the last reload's result, the config's sources, the last
 * minute), a value the command owns and hands each service it runs, so
 * it outlives the services a reload replaces. Every key is always there
 * (stable for scripts); by-reason maps hold every reason. */
#include "sf_overview.h"
#include "sf_dynbuf.h"
#include "sf_net.h"
#include "sf_time.h"
#include "internal/sf_core.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>
#include <openssl/evp.h>

#ifndef SF_VERSION
#define SF_VERSION "0.0.0"
#endif

void sf_history_note_recent(sf_history *h, int64_t ms, uint64_t accepted, uint64_t exported,
                            uint64_t lost)
{
    pthread_mutex_lock(&h->mu);
    h->recent_ms = ms;
    h->recent[0] = accepted;
    h->recent[1] = exported;
    h->recent[2] = lost;
    pthread_mutex_unlock(&h->mu);
}

void sf_history_note_config(sf_history *h, const char *sources, const char *policy)
{
    pthread_mutex_lock(&h->mu);
    snprintf(h->sources, sizeof(h->sources), "%s", sources ? sources : "");
    snprintf(h->policy, sizeof(h->policy), "%s", policy ? policy : "");
    pthread_mutex_unlock(&h->mu);
}

void sf_history_note_reload(sf_history *h, bool ok, const char *message)
{
    pthread_mutex_lock(&h->mu);
    h->count++;
    h->ok = ok;
    h->wall_ms = sf_wall_ms();
    snprintf(h->message, sizeof(h->message), "%s", message ? message : "");
    pthread_mutex_unlock(&h->mu);
}

static json_object *time_or_null(int64_t wall_ms)
{
    char buf[32];

    if (wall_ms <= 0)
        return NULL;
    sf_time_format_utc(wall_ms, buf, sizeof(buf));
    return json_object_new_string(buf);
}

/* `h` held by the caller */
static json_object *reload_object(const sf_history *h)
{
    json_object *o = json_object_new_object();

    if (o == NULL)
        return NULL;
    json_object_object_add(o, "count", json_object_new_uint64(h->count));
    json_object_object_add(o, "ok", h->count ? json_object_new_boolean(h->ok) : NULL);
    json_object_object_add(o, "time", time_or_null(h->wall_ms));
    json_object_object_add(o, "message", h->count ? json_object_new_string(h->message) : NULL);
    return o;
}

/* {reason: n, ...} for every reason; adds each into sum (may be NULL). */
static json_object *reasons(_Atomic uint64_t *v, uint64_t *sum)
{
    json_object *o = json_object_new_object();

    for (int r = 0; r < SF_REASON_COUNT; r++) {
        uint64_t n = sf_counter_get(&v[r]);

        if (sum != NULL)
            sum[r] += n;
        if (o != NULL)
            json_object_object_add(o, sf_reason_label((sf_reason)r), json_object_new_uint64(n));
    }
    return o;
}

static json_object *reason_sums(const uint64_t *v)
{
    json_object *o = json_object_new_object();

    for (int r = 0; r < SF_REASON_COUNT && o != NULL; r++)
        json_object_object_add(o, sf_reason_label((sf_reason)r), json_object_new_uint64(v[r]));
    return o;
}

static json_object *ids(sf_config_component **list, size_t n)
{
    json_object *a = json_object_new_array();

    for (size_t i = 0; i < n && a != NULL; i++)
        json_object_array_add(a, json_object_new_string(list[i]->id));
    return a;
}

/* A URL without its credentials: the document is on the metrics endpoint. */
static json_object *url_object(const char *url)
{
    char buf[2048];

    return url != NULL ? json_object_new_string(sf_net_url_redacted(url, buf, sizeof(buf)))
                       : NULL;
}

/* What a processor lets leave (describe_allowlist), as the SHA-256 of its
 * rules in one canonical text: per context in order, one line per rule
 * (kind, error mode, keys, pattern, replacement, field), then the
 * processor's own answers. Two collectors showing the same digest let the
 * same keys and fields leave; NULL when the type has no rules to say. */
static json_object *allowlist_object(const sf_component *c)
{
    sf_allowlist_desc d;
    sf_dynbuf text;
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned md_len = 0;
    char hex[2 * EVP_MAX_MD_SIZE + 1];
    size_t rules = 0;
    json_object *o;

    if (c->type->describe_allowlist == NULL || !c->type->describe_allowlist(c->config, &d))
        return NULL;
    sf_dynbuf_init(&text, 16 * 1024 * 1024);
    for (int ctx = 0; ctx < SF_OTLP_CTX_COUNT; ctx++) {
        sf_rule r;

        for (size_t i = 0; d.get(d.rules, (sf_otlp_ctx)ctx, i, &r); i++, rules++) {
            (void)sf_dynbuf_printf(&text, "%s\t%d\t%d\t", sf_otlp_ctx_name((sf_otlp_ctx)ctx),
                                   (int)r.kind, r.error_mode);
            for (size_t k = 0; k < r.n_keys; k++)
                (void)sf_dynbuf_printf(&text, "%s%s", k ? "," : "", r.keys[k]);
            (void)sf_dynbuf_printf(&text, "\t%s\t%s\t%d\n", r.pattern ? r.pattern : "",
                                   r.replacement ? r.replacement : "", (int)r.field);
        }
    }
    (void)sf_dynbuf_printf(&text, "error_mode=%d scalar_values_only=%d declared_fields=%d "
                           "max_string_length=%zu\n", d.error_mode, d.scalar_values_only,
                           d.declared_fields, d.max_string_length);
    if (d.single_values_only)
        (void)sf_dynbuf_printf(&text, "single_values_only=1\n");
    if (EVP_Digest(sf_dynbuf_ptr(&text), sf_dynbuf_len(&text), md, &md_len, EVP_sha256(),
                   NULL) != 1)
        md_len = 0;
    sf_dynbuf_release(&text);
    for (unsigned i = 0; i < md_len; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    hex[2 * md_len] = '\0';
    if ((o = json_object_new_object()) == NULL)
        return NULL;
    json_object_object_add(o, "sha256", md_len ? json_object_new_string(hex) : NULL);
    json_object_object_add(o, "rules", json_object_new_uint64(rules));
    json_object_object_add(o, "declared_fields", json_object_new_boolean(d.declared_fields));
    return o;
}

static void add_u64(json_object *o, const char *key, uint64_t v)
{
    json_object_object_add(o, key, json_object_new_uint64(v));
}

typedef struct sums {
    uint64_t accepted, exported, queued, enqueue_failed, unexported[2];
    uint64_t refused[SF_REASON_COUNT], dropped[SF_REASON_COUNT], send_failed[SF_REASON_COUNT];
} sums;

/* The signal of a component's entry, said when it is not traces (an
 * instance for logs or metrics, a receiver's counts of them). */
static void add_signal(json_object *e, sf_signal signal)
{
    if (signal != SF_SIGNAL_TRACES)
        json_object_object_add(e, "signal", json_object_new_string(sf_signal_name(signal)));
}

/* One component's entry (receivers: one per signal and transport served);
 * its counts added into s[its signal]. Retired components (list NULL)
 * only add. */
static void component_entry(sf_component *c, json_object *list, sums *all)
{
    static const char *const transports[SF_TRANSPORT_COUNT] = { "grpc", "http", "" };
    sf_counters *k = &c->counters;
    sums *s = &all[c->signal];
    json_object *e;

    switch (c->type->kind) {
    case SF_KIND_RECEIVER:
        for (int t = 0; t < SF_SIGNAL_COUNT * SF_TRANSPORT_COUNT; t++) {
            int sg = t / SF_TRANSPORT_COUNT, tr = t % SF_TRANSPORT_COUNT;
            sf_counters *tk = &c->transport[sg][tr];
            uint64_t acc = sf_counter_get(&tk->accepted_spans);

            s = &all[sg];
            if (!(c->transports & (1u << tr)) ||
                (sg != SF_SIGNAL_TRACES && !(c->signals & (1u << sg))))
                continue;
            s->accepted += acc;
            s->unexported[0] += sf_counter_get(&tk->unexported[0]);
            s->unexported[1] += sf_counter_get(&tk->unexported[1]);
            e = list != NULL ? json_object_new_object() : NULL;
            if (e == NULL) {
                json_object_put(reasons(tk->refused_spans, s->refused));
                json_object_put(reasons(tk->dropped_spans, s->dropped));
                continue;
            }
            json_object_object_add(e, "id", json_object_new_string(c->id));
            json_object_object_add(e, "transport", json_object_new_string(transports[tr]));
            add_signal(e, (sf_signal)sg);
            add_u64(e, "accepted", acc);
            json_object_object_add(e, "refused", reasons(tk->refused_spans, s->refused));
            /* dropped before any pipeline (an extension's span gate) */
            json_object_object_add(e, "dropped", reasons(tk->dropped_spans, s->dropped));
            add_u64(e, "requests", sf_counter_get(&tk->requests));
            json_object_array_add(list, e);
        }
        return;
    case SF_KIND_PROCESSOR:
        e = list != NULL ? json_object_new_object() : NULL;
        if (e == NULL) {
            json_object_put(reasons(k->dropped_spans, s->dropped));
            return;
        }
        json_object_object_add(e, "id", json_object_new_string(c->id));
        add_signal(e, c->signal);
        json_object_object_add(e, "allowlist", allowlist_object(c));
        add_u64(e, "incoming", sf_counter_get(&k->incoming_items));
        add_u64(e, "outgoing", sf_counter_get(&k->outgoing_items));
        json_object_object_add(e, "dropped", reasons(k->dropped_spans, s->dropped));
        json_object_array_add(list, e);
        return;
    case SF_KIND_EXPORTER: {
        /* queued first, then sent and send_failed (below): sf_counters_queued */
        uint64_t queued = sf_counters_queued(k);
        uint64_t sent = sf_counter_get(&k->sent_spans);
        uint64_t enq = sf_counter_get(&k->enqueue_failed_spans);

        s->exported += sent;
        s->queued += queued;
        s->enqueue_failed += enq;
        e = list != NULL ? json_object_new_object() : NULL;
        if (e == NULL) {
            json_object_put(reasons(k->send_failed_spans, s->send_failed));
            return;
        }
        json_object_object_add(e, "id", json_object_new_string(c->id));
        add_signal(e, c->signal);
        json_object_object_add(e, "type", json_object_new_string(c->type->name));
        {
            sf_export_desc d;
            bool has = c->type->describe_export != NULL &&
                       c->type->describe_export(c->config, &d);

            json_object_object_add(e, "endpoint", has ? url_object(d.endpoint) : NULL);
        }
        add_u64(e, "sent", sent);
        json_object_object_add(e, "send_failed", reasons(k->send_failed_spans, s->send_failed));
        add_u64(e, "enqueue_failed", enq);
        add_u64(e, "queued_spans", queued);
        json_object_object_add(e, "queue_size",
                               json_object_new_int64(atomic_load(&k->queue_size)));
        json_object_object_add(e, "queue_capacity",
                               json_object_new_int64(atomic_load(&k->queue_capacity)));
        add_u64(e, "retries", sf_counter_get(&k->retries));
        json_object_array_add(list, e);
        return;
    }
    case SF_KIND_EXTENSION:
        /* spans an extension made (markers): in the totals as accepted */
        s->accepted += sf_counter_get(&k->accepted_spans);
        json_object_put(reasons(k->refused_spans, s->refused));
        e = list != NULL ? json_object_new_object() : NULL;
        if (e == NULL)
            return;
        json_object_object_add(e, "id", json_object_new_string(c->id));
        json_object_object_add(e, "type", json_object_new_string(c->type->name));
        json_object_object_add(e, "status", c->type->status != NULL && !c->retired
                               ? c->type->status(c) : NULL);
        json_object_array_add(list, e);
        return;
    }
}

/* One signal's totals: what was accepted, exported, queued, filtered on
 * purpose (a `filter` processor's drops, and spans of an engine raised out
 * of band that the receivers dropped: not a loss) and lost. */
static json_object *totals_object(const sums *s)
{
    json_object *o = json_object_new_object();
    uint64_t lost = 0;

    if (o == NULL)
        return NULL;
    for (int r = 0; r < SF_REASON_COUNT; r++)
        lost += s->refused[r] +
                (r != SF_REASON_FILTERED && r != SF_REASON_OUT_OF_BAND ? s->dropped[r] : 0) +
                s->send_failed[r];
    add_u64(o, "accepted", s->accepted);
    add_u64(o, "exported", s->exported);
    add_u64(o, "queued", s->queued);
    add_u64(o, "filtered", s->dropped[SF_REASON_FILTERED]);
    add_u64(o, "lost", lost);
    json_object_object_add(o, "refused", reason_sums(s->refused));
    json_object_object_add(o, "dropped", reason_sums(s->dropped));
    json_object_object_add(o, "send_failed", reason_sums(s->send_failed));
    add_u64(o, "enqueue_failed", s->enqueue_failed);
    return o;
}

json_object *sf_overview_build(sf_component *components, size_t n, sf_component *retired,
                               size_t n_retired, const sf_config *cfg, sf_history *history)
{
    static sf_history none = SF_HISTORY_INIT;   /* a service no command runs */
    static const sf_kind kinds[] = { SF_KIND_RECEIVER, SF_KIND_PROCESSOR, SF_KIND_EXPORTER,
                                     SF_KIND_EXTENSION };
    static const char *const keys[] = { "receivers", "processors", "exporters", "extensions" };
    json_object *doc = json_object_new_object(), *pipes, *lists[4];
    sums s[SF_SIGNAL_COUNT];
    bool has[SF_SIGNAL_COUNT] = { true, false, false };    /* "spans" always */

    if (doc == NULL)
        return NULL;
    memset(s, 0, sizeof(s));
    json_object_object_add(doc, "version", json_object_new_string(SF_VERSION));
    json_object_object_add(doc, "time", time_or_null(sf_wall_ms()));
    if (history == NULL)
        history = &none;
    pthread_mutex_lock(&history->mu);
    json_object_object_add(doc, "config", history->sources[0]
                           ? json_object_new_string(history->sources)
                           : cfg->file ? json_object_new_string(cfg->file) : NULL);
    json_object_object_add(doc, "policy", history->policy[0]
                           ? json_object_new_string(history->policy) : NULL);
    {
        json_object *r = history->recent_ms > 0 ? json_object_new_object() : NULL;

        if (r != NULL) {
            json_object_object_add(r, "seconds",
                                   json_object_new_int64((history->recent_ms + 500) / 1000));
            add_u64(r, "accepted", history->recent[0]);
            add_u64(r, "exported", history->recent[1]);
            add_u64(r, "lost", history->recent[2]);
        }
        json_object_object_add(doc, "recent", r);
    }
    json_object_object_add(doc, "reload", reload_object(history));
    pthread_mutex_unlock(&history->mu);
    pipes = json_object_new_array();
    for (size_t p = 0; p < cfg->n_pipelines && pipes != NULL; p++) {
        const sf_config_pipeline *pl = &cfg->pipelines[p];
        json_object *o;

        has[pl->signal] = true;
        if ((o = json_object_new_object()) == NULL)
            continue;
        json_object_object_add(o, "id", json_object_new_string(pl->id));
        json_object_object_add(o, "signal", json_object_new_string(sf_signal_name(pl->signal)));
        json_object_object_add(o, "receivers", ids(pl->receivers, pl->n_receivers));
        json_object_object_add(o, "processors", ids(pl->processors, pl->n_processors));
        json_object_object_add(o, "exporters", ids(pl->exporters, pl->n_exporters));
        json_object_array_add(pipes, o);
    }
    json_object_object_add(doc, "pipelines", pipes);
    for (size_t k = 0; k < 4; k++)
        lists[k] = json_object_new_array();
    for (size_t k = 0; k < 4; k++)
        for (size_t i = 0; i < n; i++)
            if (components[i].type->kind == kinds[k])
                component_entry(&components[i], lists[k], s);
    for (size_t i = 0; i < n_retired; i++)
        component_entry(&retired[i], NULL, s);
    /* each signal's accounting on its own: "spans", "log_records",
     * "metric_points" (those of signals some pipeline carries) */
    for (int sg = 0; sg < SF_SIGNAL_COUNT; sg++)
        if (has[sg])
            json_object_object_add(doc, sf_signal_items((sf_signal)sg), totals_object(&s[sg]));
    {
        json_object *u = json_object_new_object();

        if (u != NULL) {
            add_u64(u, "metrics", s[SF_SIGNAL_TRACES].unexported[0]);
            add_u64(u, "logs", s[SF_SIGNAL_TRACES].unexported[1]);
        }
        json_object_object_add(doc, "unexported_requests", u);
    }
    for (size_t k = 0; k < 4; k++)
        json_object_object_add(doc, keys[k], lists[k]);
    return doc;
}

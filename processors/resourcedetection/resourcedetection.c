/* processors/resourcedetection/resourcedetection.c: the `resourcedetection`
 * processor on the data path. Its detectors run once, at start (and again
 * at the start after a reload): env reads OTEL_RESOURCE_ATTRIBUTES, system
 * gives host.name (hostname_sources, in order), os.type and, when enabled,
 * host.id from /etc/machine-id. What they found is set on the resource of
 * every request as the `resource` processor sets its constants: an edit's
 * resource inserts, applied by the codec (upsert with override, insert
 * without), which the core accounts for.
 *
 * DESIGN: the edit is filled at start, before any receiver starts (the
 * core starts processors before receivers), and is read-only afterwards:
 * the core runs it on receiver threads, concurrently. A later transform's
 * resource allowlist decides what of it leaves, as for any attribute. The
 * dns source runs getaddrinfo on a thread of its own so `timeout` bounds
 * it: a lookup past the deadline is abandoned (the thread frees its job
 * when it ends) and the next source is asked. */
#include "resourcedetection.h"

#include "sf_encoding.h"
#include "sf_otlp_wire.h"
#include "sf_time.h"

#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* OTEL_RESOURCE_ATTRIBUTES is bounded: longer or with more pairs, refused. */
#define ENV_MAX_BYTES 8192
#define ENV_MAX_PAIRS 64
#define MAX_ATTRS (ENV_MAX_PAIRS + 3)

/* The type's own series (sf_counters.values). */
enum { RM_INSERTED };

typedef struct rd_ctx {
    const sf_resourcedetection_config *cfg;
    size_t n;                           /* detected attributes */
    char *keys[MAX_ATTRS];
    char *values[MAX_ATTRS];
    sf_otlp_insert inserts[MAX_ATTRS];
    sf_otlp_edit edit;
} rd_ctx;

static void rd_clear(rd_ctx *x)
{
    for (size_t i = 0; i < x->n; i++) {
        sf_free(x->keys[i]);
        sf_free(x->values[i]);
    }
    x->n = 0;
    x->edit.n_inserts[SF_OTLP_RESOURCE] = 0;
}

/* Add key=value unless a detector before already set the key (upstream:
 * the first detector listed wins). SF_ENOMEM; SF_INVALID when not UTF-8
 * text or when the list is full. */
static sf_status rd_add(rd_ctx *x, const char *key, size_t klen, const char *value, size_t vlen)
{
    if (klen == 0 || !sf_otlp_utf8_valid((const uint8_t *)key, klen) ||
        !sf_otlp_utf8_valid((const uint8_t *)value, vlen) || memchr(key, '\0', klen) != NULL ||
        memchr(value, '\0', vlen) != NULL)
        return SF_INVALID;
    for (size_t i = 0; i < x->n; i++)
        if (strlen(x->keys[i]) == klen && memcmp(x->keys[i], key, klen) == 0)
            return SF_OK;
    if (x->n == MAX_ATTRS)
        return SF_INVALID;
    x->keys[x->n] = sf_malloc(klen + 1);
    x->values[x->n] = sf_malloc(vlen + 1);
    if (x->keys[x->n] == NULL || x->values[x->n] == NULL) {
        sf_free(x->keys[x->n]);
        sf_free(x->values[x->n]);
        return SF_ENOMEM;
    }
    memcpy(x->keys[x->n], key, klen);
    x->keys[x->n][klen] = '\0';
    memcpy(x->values[x->n], value, vlen);
    x->values[x->n][vlen] = '\0';
    x->n++;
    return SF_OK;
}

/* s[0, *n) trimmed of spaces and tabs on both ends. */
static const char *trim(const char *s, size_t *n)
{
    while (*n > 0 && (s[0] == ' ' || s[0] == '\t')) {
        s++;
        (*n)--;
    }
    while (*n > 0 && (s[*n - 1] == ' ' || s[*n - 1] == '\t'))
        (*n)--;
    return s;
}

/* The env detector: OTEL_RESOURCE_ATTRIBUTES as the OpenTelemetry SDKs
 * read it, "key1=value1,key2=value2", values percent-decoded. A malformed
 * variable sets nothing (said in `why`): half of it could be the wrong
 * half. */
static sf_status detect_env(rd_ctx *x, char *why, size_t size)
{
    const char *env = getenv("OTEL_RESOURCE_ATTRIBUTES");
    size_t len, pairs = 0, first = x->n;
    char *val = NULL;
    sf_status st = SF_OK;

    if (env == NULL || env[0] == '\0')
        return SF_OK;
    len = strlen(env);
    if (len > ENV_MAX_BYTES) {
        snprintf(why, size, "OTEL_RESOURCE_ATTRIBUTES is longer than %d bytes", ENV_MAX_BYTES);
        return SF_INVALID;
    }
    val = sf_malloc(len + 1);
    if (val == NULL)
        return SF_ENOMEM;
    for (const char *p = env; st == SF_OK && *p != '\0';) {
        const char *end = strchr(p, ','), *eq;
        size_t n = end != NULL ? (size_t)(end - p) : strlen(p), klen, vlen, out = 0;
        size_t tn = n;
        const char *k, *v;

        eq = memchr(p, '=', n);
        trim(p, &tn);
        if (tn == 0) {
            p += n + (end != NULL);
            continue;                   /* an empty member, as "a=1,,b=2" */
        }
        if (eq == NULL) {
            snprintf(why, size, "OTEL_RESOURCE_ATTRIBUTES: member %zu has no '='", pairs + 1);
            st = SF_INVALID;
            break;
        }
        klen = (size_t)(eq - p);
        k = trim(p, &klen);
        vlen = n - (size_t)(eq - p) - 1;
        v = trim(eq + 1, &vlen);
        for (size_t i = 0; i < vlen; i++) {
            if (v[i] == '%') {
                int hi = i + 2 < vlen ? sf_hex_digit(v[i + 1]) : -1;
                int lo = hi >= 0 ? sf_hex_digit(v[i + 2]) : -1;

                if (hi < 0 || lo < 0) {
                    snprintf(why, size, "OTEL_RESOURCE_ATTRIBUTES: member %zu has a bad "
                             "percent-escape", pairs + 1);
                    st = SF_INVALID;
                    break;
                }
                val[out++] = (char)(hi * 16 + lo);
                i += 2;
            } else {
                val[out++] = v[i];
            }
        }
        if (st != SF_OK)
            break;
        if (++pairs > ENV_MAX_PAIRS) {
            snprintf(why, size, "OTEL_RESOURCE_ATTRIBUTES has more than %d members",
                     ENV_MAX_PAIRS);
            st = SF_INVALID;
            break;
        }
        st = rd_add(x, k, klen, val, out);
        if (st == SF_INVALID)
            snprintf(why, size, "OTEL_RESOURCE_ATTRIBUTES: member %zu is not a key and a "
                     "UTF-8 value", pairs);
        p += n + (end != NULL);
    }
    sf_free(val);
    if (st != SF_OK) {
        /* nothing of a malformed variable */
        for (size_t i = first; i < x->n; i++) {
            sf_free(x->keys[i]);
            sf_free(x->values[i]);
        }
        x->n = first;
    }
    return st;
}

/* ---- the dns hostname source, bounded by `timeout` -------------------------- */

typedef struct fqdn_job {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done, abandoned;
    char host[256];
    char name[256];                     /* the answer, "" when none */
} fqdn_job;

static void fqdn_job_free(fqdn_job *j)
{
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mu);
    sf_free(j);
}

static void *fqdn_thread(void *arg)
{
    fqdn_job *j = arg;
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_flags = AI_CANONNAME }, *res = NULL;
    char name[256] = "";
    bool abandoned;

    if (getaddrinfo(j->host, NULL, &hints, &res) == 0 && res != NULL &&
        res->ai_canonname != NULL)
        snprintf(name, sizeof(name), "%s", res->ai_canonname);
    if (res != NULL)
        freeaddrinfo(res);
    pthread_mutex_lock(&j->mu);
    snprintf(j->name, sizeof(j->name), "%s", name);
    j->done = true;
    abandoned = j->abandoned;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    if (abandoned)
        fqdn_job_free(j);
    return NULL;
}

/* The canonical name of this host within deadline_ms, into out; false
 * when there is none in time. */
static bool hostname_dns(char *out, size_t size, int64_t deadline_ms)
{
    fqdn_job *j = sf_calloc(1, sizeof(*j));
    pthread_t t;
    pthread_attr_t attr;
    bool ok = false;

    if (j == NULL)
        return false;
    if (gethostname(j->host, sizeof(j->host) - 1) != 0 || j->host[0] == '\0') {
        sf_free(j);
        return false;
    }
    pthread_mutex_init(&j->mu, NULL);
    if (sf_cond_init(&j->cv) != 0) {
        pthread_mutex_destroy(&j->mu);
        sf_free(j);
        return false;
    }
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, fqdn_thread, j) != 0) {
        pthread_attr_destroy(&attr);
        fqdn_job_free(j);
        return false;
    }
    pthread_attr_destroy(&attr);
    pthread_mutex_lock(&j->mu);
    while (!j->done && sf_cond_wait_until(&j->cv, &j->mu, deadline_ms))
        ;
    if (!j->done) {
        j->abandoned = true;            /* the thread frees it */
        pthread_mutex_unlock(&j->mu);
        return false;
    }
    if (j->name[0] != '\0') {
        snprintf(out, size, "%s", j->name);
        ok = true;
    }
    pthread_mutex_unlock(&j->mu);
    fqdn_job_free(j);
    return ok;
}

/* /etc/machine-id: 32 hex digits and a newline (machine-id(5)). */
static bool read_machine_id(char *out, size_t size)
{
    FILE *f = fopen("/etc/machine-id", "re");
    char line[64];
    size_t n;

    if (f == NULL)
        return false;
    if (fgets(line, sizeof(line), f) == NULL) {
        fclose(f);
        return false;
    }
    fclose(f);
    n = strcspn(line, "\r\n");
    line[n] = '\0';
    if (n != 32 || strspn(line, "0123456789abcdefABCDEF") != 32 || size <= n)
        return false;
    memcpy(out, line, n + 1);
    return true;
}

static sf_status detect_system(rd_ctx *x, int64_t deadline_ms, char *why, size_t size)
{
    const sf_rd_attrs *ra = &x->cfg->system.resource_attributes;
    sf_status st = SF_OK;

    if (ra->host_name.enabled) {
        sf_rd_list sources;
        char name[256] = "";
        bool found = false;

        sf_rd_hostname_sources(x->cfg, &sources);
        for (size_t i = 0; i < sources.n && !found; i++) {
            if (sources.v[i] == SF_RD_SOURCE_DNS)
                found = hostname_dns(name, sizeof(name), deadline_ms);
            else
                found = gethostname(name, sizeof(name) - 1) == 0 && name[0] != '\0';
        }
        if (found)
            st = rd_add(x, "host.name", 9, name, strlen(name));
        else
            snprintf(why, size, "no hostname source answered");
    }
    if (st == SF_OK && ra->os_type.enabled)
        st = rd_add(x, "os.type", 7, "linux", 5);
    if (st == SF_OK && ra->host_id.enabled) {
        char id[64];

        if (read_machine_id(id, sizeof(id)))
            st = rd_add(x, "host.id", 7, id, strlen(id));
        else
            snprintf(why, size, "host.id: /etc/machine-id is missing or not 32 hex digits");
    }
    return st;
}

static sf_status rd_create(sf_component *self, const void *config)
{
    rd_ctx *x = sf_calloc(1, sizeof(*x));

    if (x == NULL)
        return SF_ENOMEM;
    x->cfg = config;
    x->edit.ctx = x;
    x->edit.inserts[SF_OTLP_RESOURCE] = x->inserts;
    sf_component_set_ctx(self, x);
    return SF_OK;
}

/* Detection, once. A detector that fails is said and skipped, as upstream
 * does: the others' attributes are still set. */
static sf_status rd_start(sf_component *self)
{
    rd_ctx *x = sf_component_ctx(self);
    int64_t deadline = sf_deadline_ms(x->cfg->timeout);
    char list[256] = "";
    size_t at = 0;
    sf_rd_list detectors;

    rd_clear(x);
    sf_rd_detectors(x->cfg, &detectors);
    for (size_t d = 0; d < detectors.n; d++) {
        char why[160] = "";
        sf_status st = detectors.v[d] == SF_RD_ENV
                           ? detect_env(x, why, sizeof(why))
                           : detect_system(x, deadline, why, sizeof(why));

        if (st == SF_ENOMEM)
            return st;
        if (st != SF_OK || why[0] != '\0')
            sf_log(SF_LOG_WARN, "processor %s: detector %s: %s", sf_component_id(self),
                   detectors.v[d] == SF_RD_ENV ? "env" : "system",
                   why[0] != '\0' ? why : sf_status_str(st));
    }
    for (size_t i = 0; i < x->n; i++) {
        x->inserts[i] = (sf_otlp_insert){ .key = x->keys[i], .value = x->values[i],
                                          .upsert = x->cfg->override };
        if (at < sizeof(list))
            at += (size_t)snprintf(list + at, sizeof(list) - at, "%s%s", i ? ", " : "",
                                   x->keys[i]);
    }
    x->edit.n_inserts[SF_OTLP_RESOURCE] = x->n;
    /* the keys, never the values: a host name is the operator's to show */
    sf_log(SF_LOG_INFO, "processor %s: detected %zu resource attribute%s%s%s",
           sf_component_id(self), x->n, x->n == 1 ? "" : "s", x->n ? ": " : "", list);
    return SF_OK;
}

static void rd_destroy(sf_component *self)
{
    rd_ctx *x = sf_component_ctx(self);

    if (x == NULL)
        return;
    rd_clear(x);
    sf_free(x);
    sf_component_set_ctx(self, NULL);
}

/* One edit for every signal: resource attributes only. */
static const sf_otlp_edit *rd_edit(const sf_component *self, sf_signal signal)
{
    const rd_ctx *x = sf_component_ctx(self);

    (void)signal;
    return &x->edit;
}

static void rd_edited(sf_component *self, const sf_request *batch)
{
    sf_count(&sf_component_counters(self)->values[RM_INSERTED], batch->stats.inserted);
}

static const sf_metric_row rd_metric_rows[] = {
    [RM_INSERTED] = { .name = "spanfence_processor_resourcedetection_inserted",
      .help = "Resource attributes the processor added or set from what it detected." },
    { 0 }
};

const sf_component_type sf_resourcedetection_processor_type = {
    .name = "resourcedetection",
    .kind = SF_KIND_PROCESSOR,
    .signals = SF_SIGNALS_ALL,
    .description = "sets resource attributes detected once at start: env "
                   "(OTEL_RESOURCE_ATTRIBUTES), system (host.name, os.type, host.id)",
    .config_size = sizeof(sf_resourcedetection_config),
    .config_map = sf_resourcedetection_config_map,
    .check = sf_resourcedetection_check,
    .create = rd_create,
    .start = rd_start,
    .edit = rd_edit,
    .edit_failure = "its detected attributes could not be set on",
    .edited = rd_edited,
    .destroy = rd_destroy,
    .metric_rows = rd_metric_rows,
};

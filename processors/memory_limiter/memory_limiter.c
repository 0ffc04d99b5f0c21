/* processors/memory_limiter/memory_limiter.c: keeps the collector inside a
 * memory budget. Backed by the counted allocator (pipeline/sf_alloc.h), not
 * by RSS polling alone:
 *   - past the soft limit (limit - spike) receivers refuse new data before
 *     decoding it, with a retryable status (gRPC UNAVAILABLE, HTTP 503), and
 *     this processor refuses batches that still arrive;
 *   - past the hard limit counted allocations fail, so memory never grows
 *     past it; what needs memory is refused, retryably;
 *   - a thread samples RSS every check_interval and adds pressure while RSS
 *     is over the hard limit (memory the count cannot see: gRPC, libcurl).
 * The limits are process-wide: with several memory_limiter instances the
 * last one started wins. */
#include "memory_limiter.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct limiter {
    const sf_memory_limiter_config *cfg;
    size_t hard, soft;
    pthread_t thread;
    bool running;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool stop;
} limiter;

/* Total memory: the cgroup v2 limit when there is one, else MemTotal. */
static size_t total_memory(void)
{
    unsigned long long v = 0;
    char line[128];
    FILE *f = fopen("/sys/fs/cgroup/memory.max", "r");

    if (f != NULL) {
        if (fgets(line, sizeof(line), f) != NULL && sscanf(line, "%llu", &v) == 1 && v > 0) {
            fclose(f);
            return (size_t)v;
        }
        fclose(f);
    }
    f = fopen("/proc/meminfo", "r");
    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "MemTotal: %llu kB", &v) == 1)
            break;
    fclose(f);
    return (size_t)v * 1024;
}

static size_t rss_bytes(void)
{
    unsigned long pages_total, pages_rss;
    FILE *f = fopen("/proc/self/statm", "r");
    size_t rss = 0;

    if (f == NULL)
        return 0;
    if (fscanf(f, "%lu %lu", &pages_total, &pages_rss) == 2)
        rss = (size_t)pages_rss * (size_t)sysconf(_SC_PAGESIZE);
    fclose(f);
    return rss;
}

static void *sampler(void *arg)
{
    limiter *l = arg;
    bool pressure = false;

    pthread_mutex_lock(&l->lock);
    while (!l->stop) {
        struct timespec ts;
        size_t rss = rss_bytes();

        /* Hysteresis: on above the hard limit, off again below the soft. */
        if (!pressure && rss > l->hard) {
            pressure = true;
            sf_warn("memory_limiter: RSS %zu MiB is over the %zu MiB limit: refusing data",
                    rss >> 20, l->hard >> 20);
        } else if (pressure && rss < l->soft) {
            pressure = false;
            sf_info("memory_limiter: RSS %zu MiB back under %zu MiB: accepting data",
                    rss >> 20, l->soft >> 20);
        }
        sf_alloc_set_external_pressure(pressure);
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += l->cfg->check_interval / 1000;
        ts.tv_nsec += (l->cfg->check_interval % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&l->cond, &l->lock, &ts);
    }
    pthread_mutex_unlock(&l->lock);
    sf_alloc_set_external_pressure(0);
    return NULL;
}

static sf_status limiter_create(sf_component *self, const void *config)
{
    const sf_memory_limiter_config *cfg = config;
    limiter *l = sf_calloc(1, sizeof(*l));
    size_t spike;

    if (l == NULL)
        return SF_ENOMEM;
    l->cfg = cfg;
    if (cfg->limit_mib > 0) {
        l->hard = (size_t)cfg->limit_mib << 20;
        spike = cfg->spike_limit_mib > 0 ? (size_t)cfg->spike_limit_mib << 20 : l->hard / 5;
    } else {
        size_t total = total_memory();
        l->hard = total / 100 * (size_t)cfg->limit_percentage;
        spike = cfg->spike_limit_percentage > 0 ? total / 100 * (size_t)cfg->spike_limit_percentage
                                                : l->hard / 5;
    }
    l->soft = l->hard - spike;
    pthread_mutex_init(&l->lock, NULL);
    pthread_cond_init(&l->cond, NULL);
    sf_component_set_ctx(self, l);
    return SF_OK;
}

static sf_status limiter_start(sf_component *self)
{
    limiter *l = sf_component_ctx(self);

    sf_alloc_set_limits(l->soft, l->hard);
    if (pthread_create(&l->thread, NULL, sampler, l) != 0)
        return SF_ENOMEM;
    l->running = true;
    sf_info("processor '%s': refusing data above %zu MiB, hard limit %zu MiB",
            sf_component_id(self), l->soft >> 20, l->hard >> 20);
    return SF_OK;
}

/* The same decision for both forms of the batch. */
static sf_status admit(sf_component *self, size_t spans)
{
    sf_counters *c = sf_component_counters(self);

    sf_count(&c->incoming_items, spans);
    if (sf_alloc_under_pressure()) {
        sf_count(&c->dropped_spans[SF_REASON_MEMORY_LIMIT], spans);
        return SF_MEMLIMIT;
    }
    sf_count(&c->outgoing_items, spans);
    return SF_OK;
}

static sf_status limiter_consume(sf_component *self, sf_batch *batch)
{
    return admit(self, batch->spans);
}

static void limiter_shutdown(sf_component *self)
{
    limiter *l = sf_component_ctx(self);

    if (!l->running)
        return;
    pthread_mutex_lock(&l->lock);
    l->stop = true;
    pthread_cond_signal(&l->cond);
    pthread_mutex_unlock(&l->lock);
    pthread_join(l->thread, NULL);
    l->running = false;
    sf_alloc_set_limits(0, 0);
}

static void limiter_destroy(sf_component *self)
{
    limiter *l = sf_component_ctx(self);

    if (l == NULL)
        return;
    limiter_shutdown(self);
    pthread_mutex_destroy(&l->lock);
    pthread_cond_destroy(&l->cond);
    sf_free(l);
}

const sf_component_type sf_memory_limiter_processor_type = {
    .name = "memory_limiter",
    .kind = SF_KIND_PROCESSOR,
    .description = "refuses data (retryably) when memory is short; keeps memory under a hard limit",
    .config_size = sizeof(sf_memory_limiter_config),
    .config_map = sf_memory_limiter_config_map,
    .check = sf_memory_limiter_check,
    .create = limiter_create,
    .start = limiter_start,
    .consume = limiter_consume,
    .shutdown = limiter_shutdown,
    .destroy = limiter_destroy,
};

/* processors/memory_limiter/memory_limiter.c: keeps the collector inside a
 * memory budget. Backed by the counted allocator (pipeline/sf_alloc.h), not
 * by RSS polling alone:
 *   - past the soft limit (limit - spike) of counted memory, receivers
 *     refuse new data before decoding it, with a retryable status (gRPC
 *     UNAVAILABLE, HTTP 503), and this processor refuses batches that still
 *     arrive;
 *   - past the hard limit counted allocations fail, so counted memory never
 *     grows past it; what needs memory is refused, retryably;
 *   - a thread samples RSS every check_interval as a guard for memory the
 *     count cannot see (gRPC core, libcurl, malloc's free lists). It judges
 *     RSS net of the baseline taken at start (shared libraries, thread
 *     stacks), asks malloc to give free memory back (malloc_trim) before
 *     judging, and refuses while that net RSS is over the hard limit. The
 *     guard always releases: below the soft limit, or as soon as counted
 *     memory is low (then refusing frees nothing, so it could only latch).
 *     It also trims whenever counted memory has fallen by a spike's worth,
 *     so memory freed when a backlog drains goes back to the system.
 * The limits go to the service's memory budget (sf_component.h), which
 * applies the tightest of every memory_limiter's to the counted allocator:
 * with several instances, none undoes another. */
#include "memory_limiter.h"

#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sf_time.h"

/* Under AddressSanitizer RSS is mostly the sanitizer's (shadow memory, and
 * freed blocks held in its quarantine, 256 MiB by default), so the RSS guard
 * would judge the sanitizer, not the collector: in such builds (the test
 * suite's build-asan) it is off and the count alone holds the budget. It
 * refused a flood of 1,000 streams at 83-285 MiB of RSS with 8-46 MiB
 * counted (ctest e2e/flood_streams under ASan). */
#if defined(__SANITIZE_ADDRESS__)
#define RSS_GUARD 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RSS_GUARD 0
#endif
#endif
#ifndef RSS_GUARD
#define RSS_GUARD 1
#endif

/* Trim at most this often while RSS stays high (malloc_trim walks the heap). */
#define TRIM_MIN_INTERVAL_MS 50

typedef struct limiter {
    sf_component *self;
    const sf_memory_limiter_config *cfg;
    size_t hard, soft;
    size_t baseline;            /* RSS at start */
    pthread_t thread;
    bool running;
    pthread_mutex_t lock;
    pthread_cond_t cond;        /* on CLOCK_MONOTONIC */
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

static size_t net_rss(const limiter *l)
{
    size_t rss = rss_bytes();

    return rss > l->baseline ? rss - l->baseline : 0;
}

/* Upstream's memory_limiter series (v0.120, deprecated there since
 * v0.110 but still on collector-health dashboards), by row. */
enum { ROW_ACCEPTED, ROW_REFUSED };

static const sf_metric_row limiter_metric_rows[] = {
    [ROW_ACCEPTED] = { .name = "otelcol_processor_accepted_%s", .gauge = false,
                       .help = "Items the memory limiter passed on." },
    [ROW_REFUSED] = { .name = "otelcol_processor_refused_%s", .gauge = false,
                      .help = "Items refused for memory: by this limiter, and by the receivers "
                              "before decoding while memory was short (collector-wide, "
                              "refreshed every check_interval)." },
    { .name = NULL }
};

/* ROW_REFUSED: what this limiter refused plus what receivers refused for
 * memory (sf_totals), set absolutely so a reload's carried count stays. */
static void update_refused(sf_component *self)
{
    sf_counters *c = sf_component_counters(self);
    sf_totals t;

    sf_component_totals(self, &t);
    atomic_store(&c->values[ROW_REFUSED],
                 sf_counter_get(&c->dropped_spans[SF_REASON_MEMORY_LIMIT]) +
                 t.refused[SF_REASON_MEMORY_LIMIT]);
}

static void *sampler(void *arg)
{
    limiter *l = arg;
    bool pressure = false;
    size_t spike = l->hard - l->soft;
    size_t low = l->soft / 2;           /* counted memory this low: never refuse on RSS */
    size_t trimmed_at = 0;              /* counted memory at the last trim */
    int64_t last_trim = 0;

    pthread_mutex_lock(&l->lock);
    while (!l->stop) {
        size_t counted = sf_alloc_in_use();
        size_t net = net_rss(l);
        int64_t t = sf_now_ms();

        /* Give free heap back before judging RSS, when RSS is high and more
         * than a spike is resident beyond what is counted, or when counted
         * memory fell by a spike since the last trim (a backlog drained). */
        if ((net > l->soft && net > counted + spike / 2 &&
             t - last_trim >= TRIM_MIN_INTERVAL_MS) ||
            counted + spike / 2 < trimmed_at) {
            size_t before = net;

            malloc_trim(0);
            last_trim = t;
            trimmed_at = counted;
            net = net_rss(l);
            sf_debug("memory_limiter: trimmed the heap: RSS over the baseline %zu -> %zu MiB "
                     "(counted %zu MiB)", before >> 20, net >> 20, counted >> 20);
        }
        if (counted > trimmed_at)
            trimmed_at = counted;

        if (RSS_GUARD && !pressure && net > l->hard && counted >= low) {
            pressure = true;
            sf_warn("memory_limiter: RSS %zu MiB over the start-up baseline (%zu MiB) is over "
                    "the %zu MiB limit (counted %zu MiB): refusing data",
                    net >> 20, l->baseline >> 20, l->hard >> 20, counted >> 20);
        } else if (pressure && (net < l->soft || counted < low)) {
            pressure = false;
            sf_info("memory_limiter: RSS %zu MiB over the baseline, counted %zu MiB: "
                    "accepting data", net >> 20, counted >> 20);
        }
        sf_component_set_memory_pressure(l->self, pressure);
        update_refused(l->self);
        sf_cond_wait_until(&l->cond, &l->lock, sf_deadline_ms(l->cfg->check_interval));
    }
    pthread_mutex_unlock(&l->lock);
    update_refused(l->self);
    sf_component_set_memory_pressure(l->self, false);
    return NULL;
}

static sf_status limiter_create(sf_component *self, const void *config)
{
    const sf_memory_limiter_config *cfg = config;
    limiter *l = sf_calloc(1, sizeof(*l));
    size_t spike;

    if (l == NULL)
        return SF_ENOMEM;
    l->self = self;
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
    sf_cond_init(&l->cond);         /* timed waits: on CLOCK_MONOTONIC */
    sf_component_set_ctx(self, l);
    return SF_OK;
}

static sf_status limiter_start(sf_component *self)
{
    limiter *l = sf_component_ctx(self);

    sf_component_set_memory_limits(self, l->soft, l->hard);
    malloc_trim(0);
    l->baseline = rss_bytes();
    if (pthread_create(&l->thread, NULL, sampler, l) != 0) {
        sf_component_set_memory_limits(self, 0, 0);
        return SF_ENOMEM;
    }
    l->running = true;
    if (RSS_GUARD)
        sf_info("processor '%s': refusing data above %zu MiB, hard limit %zu MiB "
                "(RSS guard over a %zu MiB start-up baseline)",
                sf_component_id(self), l->soft >> 20, l->hard >> 20, l->baseline >> 20);
    else
        sf_info("processor '%s': refusing data above %zu MiB, hard limit %zu MiB (no RSS "
                "guard: an AddressSanitizer build, whose RSS is the sanitizer's)",
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
    sf_count(&c->values[ROW_ACCEPTED], spans);
    return SF_OK;
}

static sf_status limiter_consume(sf_component *self, sf_request *batch)
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
    sf_component_set_memory_limits(self, 0, 0);
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
    .signals = SF_SIGNALS_ALL,
    .config_size = sizeof(sf_memory_limiter_config),
    .config_map = sf_memory_limiter_config_map,
    .check = sf_memory_limiter_check,
    .create = limiter_create,
    .start = limiter_start,
    .consume = limiter_consume,
    .shutdown = limiter_shutdown,
    .destroy = limiter_destroy,
    .metric_rows = limiter_metric_rows,
};

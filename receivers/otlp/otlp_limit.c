/* receivers/otlp/otlp_limit.c: the token bucket of the `otlp` receiver's
 * per-connection rate limits, and the names of the reasons a connection is
 * closed for crossing one. */
#include "otlp_limit.h"

const char *sf_otlp_close_label(sf_otlp_close why)
{
    static const char *const labels[SF_OTLP_CLOSE_COUNT] = {
#define SF_OTLP_CLOSE_LABEL(e, label) [SF_OTLP_CLOSE_##e] = label,
        SF_OTLP_CLOSE_MAP(SF_OTLP_CLOSE_LABEL)
#undef SF_OTLP_CLOSE_LABEL
    };

    return (unsigned)why < SF_OTLP_CLOSE_COUNT ? labels[why] : "unknown";
}

void sf_otlp_bucket_init(sf_otlp_bucket *b, int64_t tokens, int64_t now_ms)
{
    b->tokens = tokens;
    b->last_ms = now_ms;
}

static void bucket_refill(sf_otlp_bucket *b, int64_t rate, int64_t burst, int64_t now_ms)
{
    int64_t dt = now_ms - b->last_ms;

    if (dt <= 0)
        return;
    /* Whole tokens only, so a stream of calls 1 ms apart still refills;
     * the remainder's time is kept. */
    if (rate > 0 && dt > INT64_MAX / rate)
        dt = INT64_MAX / rate;
    {
        int64_t add = dt * rate / 1000;

        if (add == 0)
            return;
        b->last_ms = add >= burst ? now_ms : b->last_ms + add * 1000 / rate;
        b->tokens = b->tokens > burst - add ? burst : b->tokens + add;
    }
}

bool sf_otlp_bucket_take(sf_otlp_bucket *b, int64_t n, int64_t rate, int64_t burst,
                         int64_t now_ms)
{
    bucket_refill(b, rate, burst, now_ms);
    if (b->tokens < n)
        return false;
    b->tokens -= n;
    return true;
}

bool sf_otlp_bucket_open(sf_otlp_bucket *b, int64_t rate, int64_t burst, int64_t now_ms)
{
    bucket_refill(b, rate, burst, now_ms);
    return b->tokens > 0;
}

void sf_otlp_bucket_charge(sf_otlp_bucket *b, int64_t n, int64_t debt_max)
{
    b->tokens = b->tokens - n < -debt_max ? -debt_max : b->tokens - n;
}

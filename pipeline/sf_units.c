/* sf_units.c: durations ("1m30s", "250ms") and sizes ("512MiB", "10MB")
 * in config values, parsed strictly (no spaces, no sign, known units only)
 * and formatted back for range messages; host names for TLS server names. */
#include "internal/sf_config_int.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#define NS_PER_MS 1000000ULL

typedef struct unit {
    const char *name;
    unsigned long long factor;
} unit;

/* Longest names first so "ms" is not read as "m" followed by junk. */
static const unit duration_units[] = {
    { "ns", 1ULL }, { "us", 1000ULL }, { "\xc2\xb5s", 1000ULL }, { "ms", NS_PER_MS },
    { "s", 1000ULL * NS_PER_MS }, { "m", 60ULL * 1000 * NS_PER_MS },
    { "h", 3600ULL * 1000 * NS_PER_MS }, { NULL, 0 }
};

sf_status sf_parse_duration(const char *s, int64_t *ms)
{
    unsigned __int128 total = 0;    /* nanoseconds */
    const char *p = s;

    if (s == NULL || *s == '\0')
        return SF_INVALID;
    if (strcmp(s, "0") == 0) {
        *ms = 0;
        return SF_OK;
    }
    while (*p) {
        unsigned __int128 whole = 0, frac = 0, scale = 1;
        const unit *u = NULL;
        size_t best = 0;
        bool digits = false;

        while (isdigit((unsigned char)*p)) {
            whole = whole * 10 + (unsigned)(*p++ - '0');
            digits = true;
            if (whole > ((unsigned __int128)1 << 80))
                return SF_INVALID;
        }
        if (*p == '.') {
            p++;
            while (isdigit((unsigned char)*p)) {
                if (scale < 1000000000000000000ULL) {
                    frac = frac * 10 + (unsigned)(*p - '0');
                    scale *= 10;
                }
                p++;
                digits = true;
            }
        }
        if (!digits)
            return SF_INVALID;
        for (const unit *c = duration_units; c->name; c++) {
            size_t l = strlen(c->name);

            if (l > best && strncmp(p, c->name, l) == 0) {
                u = c;
                best = l;
            }
        }
        if (u == NULL)
            return SF_INVALID;
        p += best;
        total += whole * u->factor + (frac * u->factor + scale - 1) / scale;
        if (total > (unsigned __int128)INT64_MAX)
            return SF_INVALID;
    }
    *ms = (int64_t)((total + NS_PER_MS - 1) / NS_PER_MS);
    return SF_OK;
}

static const unit size_units[] = {
    { "KiB", 1ULL << 10 }, { "MiB", 1ULL << 20 }, { "GiB", 1ULL << 30 }, { "TiB", 1ULL << 40 },
    { "KB", 1000ULL }, { "MB", 1000000ULL }, { "GB", 1000000000ULL },
    { "TB", 1000000000000ULL }, { "B", 1ULL }, { NULL, 0 }
};

sf_status sf_parse_size(const char *s, int64_t *bytes)
{
    unsigned __int128 v = 0;
    const char *p = s;
    unsigned long long factor = 1;

    if (s == NULL || !isdigit((unsigned char)*s))
        return SF_INVALID;
    while (isdigit((unsigned char)*p)) {
        v = v * 10 + (unsigned)(*p++ - '0');
        if (v > (unsigned __int128)INT64_MAX)
            return SF_INVALID;
    }
    if (*p) {
        const unit *u;

        for (u = size_units; u->name; u++)
            if (strcmp(p, u->name) == 0)
                break;
        if (u->name == NULL)
            return SF_INVALID;
        factor = u->factor;
    }
    v *= factor;
    if (v > (unsigned __int128)INT64_MAX)
        return SF_INVALID;
    *bytes = (int64_t)v;
    return SF_OK;
}

void sf_format_duration(int64_t ms, char *buf, size_t size)
{
    size_t off = 0;
    int64_t h = ms / 3600000, m = ms / 60000 % 60, s = ms / 1000 % 60, r = ms % 1000;

    if (size == 0)
        return;
    buf[0] = '\0';
    if (ms <= 0) {
        snprintf(buf, size, "0s");
        return;
    }
#define PART(v, u)                                                               \
    do {                                                                         \
        if ((v) && off < size)                                                   \
            off += (size_t)snprintf(buf + off, size - off, "%lld%s", (long long)(v), u); \
    } while (0)
    PART(h, "h");
    PART(m, "m");
    PART(s, "s");
    PART(r, "ms");
#undef PART
}

void sf_format_size(int64_t bytes, char *buf, size_t size)
{
    static const unit shown[] = {
        { "TiB", 1ULL << 40 }, { "GiB", 1ULL << 30 }, { "MiB", 1ULL << 20 }, { "KiB", 1ULL << 10 },
        { NULL, 0 }
    };

    for (const unit *u = shown; u->name; u++) {
        if (bytes > 0 && (unsigned long long)bytes % u->factor == 0) {
            snprintf(buf, size, "%lld%s", (long long)((unsigned long long)bytes / u->factor),
                     u->name);
            return;
        }
    }
    snprintf(buf, size, "%lld", (long long)bytes);
}

bool sf_is_host_name(const char *s)
{
    size_t len = strlen(s), label = 0;

    if (len == 0 || len > 253)
        return false;
    for (size_t i = 0; i <= len; i++) {
        unsigned char c = (unsigned char)s[i];

        if (c == '.' || c == '\0') {
            if (label == 0 || label > 63 || s[i - 1] == '-')
                return false;
            label = 0;
            continue;
        }
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-'))
            return false;
        if (c == '-' && label == 0)
            return false;
        label++;
    }
    return true;
}

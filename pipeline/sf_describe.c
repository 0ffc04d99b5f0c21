/* sf_describe.c: the names of the words component types describe
 * themselves with (sf_describe.h). */
#include "sf_describe.h"

#include <string.h>

const char *sf_error_mode_name(int mode)
{
    static const char *const names[] = {
#define SF_ERROR_MODE_NAME(e, name) name,
        SF_ERROR_MODE_MAP(SF_ERROR_MODE_NAME)
#undef SF_ERROR_MODE_NAME
    };

    return mode >= 0 && mode < SF_ERROR_MODE_COUNT ? names[mode] : "?";
}

const char *sf_otlp_ctx_name(sf_otlp_ctx c)
{
    static const char *const names[SF_OTLP_CTX_COUNT] = {
        [SF_OTLP_RESOURCE] = "resource",
        [SF_OTLP_SCOPE] = "scope",
        [SF_OTLP_SPAN] = "span",
        [SF_OTLP_SPANEVENT] = "spanevent",
        [SF_OTLP_LINK] = "link",
        [SF_OTLP_LOG] = "log",
        [SF_OTLP_METRIC] = "metric",
        [SF_OTLP_DATAPOINT] = "datapoint",
    };

    return (int)c >= 0 && c < SF_OTLP_CTX_COUNT ? names[c] : "?";
}

bool sf_sorted_keys_has(const char *const *keys, size_t n, const char *key)
{
    size_t lo = 0, hi = n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(key, keys[mid]);

        if (c == 0)
            return true;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return false;
}

/* sf_status.c: names and messages for sf_status, from the one X-macro table. */
#include "sf_status.h"

#include <ctype.h>

const char *sf_status_name(sf_status s)
{
    switch (s) {
#define SF_STATUS_NAME(name, val, retry, msg) case SF_##name: return #name;
    SF_STATUS_MAP(SF_STATUS_NAME)
#undef SF_STATUS_NAME
    }
    return "UNKNOWN";
}

const char *sf_status_str(sf_status s)
{
    switch (s) {
#define SF_STATUS_MSG(name, val, retry, msg) case SF_##name: return msg;
    SF_STATUS_MAP(SF_STATUS_MSG)
#undef SF_STATUS_MSG
    }
    return "unknown status";
}

bool sf_status_retryable(sf_status s)
{
    switch (s) {
#define SF_STATUS_RETRY(name, val, retry, msg) case SF_##name: return retry;
    SF_STATUS_MAP(SF_STATUS_RETRY)
#undef SF_STATUS_RETRY
    }
    return false;
}

/* receivers/otlp/otlp_limit.h: the `otlp` receiver's per-connection rate
 * limits (a token bucket) and the reasons a connection is closed for
 * crossing one (spanfence_receiver_closed_connections{reason}), shared by
 * the gRPC and HTTP servers. */
#ifndef SF_RECEIVERS_OTLP_LIMIT_H
#define SF_RECEIVERS_OTLP_LIMIT_H

#include <stdbool.h>
#include <stdint.h>

/* X(ENUM, label): why a connection was closed for what it cost us. */
#define SF_OTLP_CLOSE_MAP(X)                        \
    X(WINDOW_UPDATE,  "window_update_flood")        \
    X(EMPTY_DATA,     "empty_data_flood")           \
    X(PRIORITY,       "priority_flood")             \
    X(RESETS,         "reset_flood")                \
    X(DECOMPRESSION,  "decompression")

typedef enum sf_otlp_close {
#define SF_OTLP_CLOSE_ENUM(e, label) SF_OTLP_CLOSE_##e,
    SF_OTLP_CLOSE_MAP(SF_OTLP_CLOSE_ENUM)
#undef SF_OTLP_CLOSE_ENUM
    SF_OTLP_CLOSE_COUNT
} sf_otlp_close;

/* The metric label of a close reason. */
const char *sf_otlp_close_label(sf_otlp_close why);

/* A token bucket: `rate` tokens a second, at most `burst` banked. Frames
 * take one each; decompression takes the bytes it produced, after the fact
 * (the balance may go negative: one message is always let through when
 * the bucket is not in debt, whatever its size). */
typedef struct sf_otlp_bucket {
    int64_t tokens;
    int64_t last_ms;
} sf_otlp_bucket;

/* Start full-ish: `tokens` banked as of `now_ms`. */
void sf_otlp_bucket_init(sf_otlp_bucket *b, int64_t tokens, int64_t now_ms);
/* Refill for the time since the last call, then take `n`. False when the
 * bucket had fewer than `n` (nothing is taken then). */
bool sf_otlp_bucket_take(sf_otlp_bucket *b, int64_t n, int64_t rate, int64_t burst,
                         int64_t now_ms);
/* Refill, then whether the balance is positive (work may start). */
bool sf_otlp_bucket_open(sf_otlp_bucket *b, int64_t rate, int64_t burst, int64_t now_ms);
/* Charge `n` done already: the balance may go negative, down to
 * -`debt_max` (the largest message, so one costs its whole size). */
void sf_otlp_bucket_charge(sf_otlp_bucket *b, int64_t n, int64_t debt_max);

#endif

/* sf_sender_config.c: config rows of `sending_queue` and `retry_on_failure`,
 * shared by every network exporter (defaults as upstream's exporterhelper;
 * `storage` is refused: spanfence never writes spans to disk). */
#include "sf_sender.h"

#include <stddef.h>

const sf_config_row sf_sending_queue_rows[] = {
    { .key = "enabled", .type = SF_CFG_BOOL, .def = "true",
      .offset = offsetof(sf_queue_config, enabled),
      .help = "queue batches in memory and send them from consumer threads" },
    { .key = "queue_size", .type = SF_CFG_INT, .def = "1000",
      .offset = offsetof(sf_queue_config, queue_size),
      .help = "most batches held; a full queue refuses new batches (counted)",
      .min = 1, .max = 1000000 },
    { .key = "num_consumers", .type = SF_CFG_INT, .def = "10",
      .offset = offsetof(sf_queue_config, num_consumers),
      .help = "consumer threads sending from the queue", .min = 1, .max = 256 },
    { .key = "storage", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "persistent queue storage is not supported: spanfence never writes spans to disk" },
    { 0 }
};

const sf_config_row sf_retry_rows[] = {
    { .key = "enabled", .type = SF_CFG_BOOL, .def = "true",
      .offset = offsetof(sf_retry_config, enabled), .help = "retry failed sends" },
    { .key = "initial_interval", .type = SF_CFG_DURATION, .def = "5s",
      .offset = offsetof(sf_retry_config, initial_interval),
      .help = "wait before the first retry", .min = 1, .max = 3600000 },
    { .key = "multiplier", .type = SF_CFG_DOUBLE, .def = "1.5",
      .offset = offsetof(sf_retry_config, multiplier),
      .help = "backoff growth per retry", .dmin = 1.0, .dmax = 100.0 },
    { .key = "randomization_factor", .type = SF_CFG_DOUBLE, .def = "0.5",
      .offset = offsetof(sf_retry_config, randomization_factor),
      .help = "jitter, as a fraction of the interval", .dmin = 0.0, .dmax = 1.0 },
    { .key = "max_interval", .type = SF_CFG_DURATION, .def = "30s",
      .offset = offsetof(sf_retry_config, max_interval),
      .help = "longest wait between retries", .min = 1, .max = 3600000 },
    { .key = "max_elapsed_time", .type = SF_CFG_DURATION, .def = "300s",
      .offset = offsetof(sf_retry_config, max_elapsed_time),
      .help = "give up on a batch (drop and count it) after this long; 0 retries forever",
      .min = 0, .max = 86400000 },
    { 0 }
};

/* The defaults above, as the sender takes them when a section was not
 * decoded (tests/pipeline/test_sender_config holds the two equal). */
const sf_queue_config sf_sending_queue_defaults = {
    .enabled = true, .queue_size = 1000, .num_consumers = 10,
};

const sf_retry_config sf_retry_defaults = {
    .enabled = true, .initial_interval = 5000, .multiplier = 1.5,
    .randomization_factor = 0.5, .max_interval = 30000, .max_elapsed_time = 300000,
};

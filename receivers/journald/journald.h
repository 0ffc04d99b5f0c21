/* receivers/journald/journald.h: the `journald` receiver's config (upstream's
 * keys: units, identifiers, matches, priority, dmesg, start_at, directory,
 * files; spanfence's: cursor_file and the bounds on records and batches)
 * and the record builder (journald_record.c) that turns journal entries
 * into one ExportLogsServiceRequest. */
#ifndef SF_RECEIVERS_JOURNALD_H
#define SF_RECEIVERS_JOURNALD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sf_component.h"

/* One `matches` entry: FIELD=value terms, all of which must hold. */
typedef struct sf_jd_match {
    size_t n;
    char **terms;               /* "FIELD=value" */
} sf_jd_match;

typedef struct sf_jd_matches {
    size_t n;
    sf_jd_match *v;
} sf_jd_matches;

/* `priority`: records from `most` (0, emerg) down to `least` (7, debug). */
typedef struct sf_jd_priority {
    int most;
    int least;
} sf_jd_priority;

enum { SF_JD_START_END = 0, SF_JD_START_BEGINNING };

typedef struct sf_journald_config {
    sf_strlist units;           /* "_SYSTEMD_UNIT=x.service" terms, mangled */
    sf_strlist identifiers;
    sf_jd_matches matches;
    sf_jd_priority priority;
    bool dmesg;
    int start_at;               /* SF_JD_START_* */
    char *directory;            /* NULL: the local journal */
    sf_strlist files;
    char *cursor_file;          /* NULL: the cursor lives in memory only */
    int64_t max_message_size;   /* bytes of a body */
    int64_t max_batch_records;
} sf_journald_config;

extern const sf_config_row sf_journald_config_map[];
sf_status sf_journald_check(sf_cfg_ctx *ctx, void *config);

/* ---- journald_record.c: entries into a logs request ------------------------ */

/* What a journal entry brings that a record keeps. Text fields are the
 * bytes after "FIELD=" (NULL: absent), of any content. */
typedef struct sf_jd_entry {
    uint64_t realtime_us;       /* __REALTIME_TIMESTAMP */
    const uint8_t *message;
    size_t message_len;
    const uint8_t *priority;
    size_t priority_len;
    const uint8_t *unit;        /* _SYSTEMD_UNIT */
    size_t unit_len;
    const uint8_t *identifier;  /* SYSLOG_IDENTIFIER */
    size_t identifier_len;
    const uint8_t *pid;         /* _PID */
    size_t pid_len;
} sf_jd_entry;

/* What building a record did to it, added into by sf_jd_builder_add. */
typedef struct sf_jd_notes {
    uint64_t truncated;         /* bodies cut to max_message_size */
    uint64_t invalid_utf8;      /* bodies with bytes that were not UTF-8, replaced */
    uint64_t dropped_fields;    /* attributes left out: not UTF-8, or too long */
} sf_jd_notes;

/* Attribute values longer than this are left out (and counted). */
#define SF_JD_MAX_FIELD 256

typedef struct sf_jd_builder sf_jd_builder;

/* A builder of at most `max_records` records, bodies bounded to
 * `max_message` bytes, everything in `arena` (the caller's; reset it with
 * sf_jd_builder_reset). NULL on no memory. */
sf_jd_builder *sf_jd_builder_create(sf_arena *arena, size_t max_records, size_t max_message);
void sf_jd_builder_destroy(sf_jd_builder *b);
/* Forget the records (and reset the arena). */
void sf_jd_builder_reset(sf_jd_builder *b);
size_t sf_jd_builder_count(const sf_jd_builder *b);
/* Bytes of bodies and attributes so far. */
size_t sf_jd_builder_bytes(const sf_jd_builder *b);
/* One record from `e`, observed at `observed_ns`: body MESSAGE (valid
 * UTF-8, at most max_message bytes), severity from PRIORITY, time from
 * the entry, attributes _SYSTEMD_UNIT, SYSLOG_IDENTIFIER, _PID. SF_FULL
 * when the builder has max_records; SF_ENOMEM. */
sf_status sf_jd_builder_add(sf_jd_builder *b, const sf_jd_entry *e, uint64_t observed_ns,
                            sf_jd_notes *notes);
/* The records as one ExportLogsServiceRequest in a new sf_malloc'd buffer
 * (*out, the caller's to sf_free). SF_ENOMEM. */
sf_status sf_jd_builder_encode(sf_jd_builder *b, uint8_t **out, size_t *len);

/* in[0, n) as UTF-8 into out (room for `cap` bytes): each byte that does
 * not start a valid sequence becomes U+FFFD; stops before a character that
 * would pass `cap`. Returns the bytes written; *bad the replacements,
 * *cut whether input was left over. */
size_t sf_jd_utf8_repair(const uint8_t *in, size_t n, uint8_t *out, size_t cap, size_t *bad,
                         bool *cut);

/* PRIORITY (0..7) as upstream maps it: severity number and text; false
 * for anything else. */
bool sf_jd_severity(const uint8_t *p, size_t n, int *number, const char **text);

#endif

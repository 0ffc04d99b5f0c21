/* internal/sf_config_int.h: what the config loader's files share and what
 * tests may call directly: the YAML reader (sf_yaml.c), the row decoder and
 * its context (sf_confmap.c), diagnostics helpers (sf_diag.c) and the
 * duration/size formatters (sf_units.c). Components never include this. */
#ifndef SF_CONFIG_INT_H
#define SF_CONFIG_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../sf_arena.h"
#include "../sf_config.h"

/* The decoding context. Lives on the loader's stack; `path` and every
 * string it hands out live in `arena`, which the loaded config owns. */
struct sf_cfg_ctx {
    sf_diag *diag;
    sf_arena *arena;
    const char *path;           /* key path of the mapping being decoded, "" at the top */
    const sf_node *node;        /* key node of the component/section (sf_cfg_node) */
    const sf_node *value;       /* its value mapping, during check (sf_cfg_value) */
    bool oom;                   /* an allocation failed: the load ends with SF_ENOMEM */
};

void sf_cfg_ctx_init(sf_cfg_ctx *ctx, sf_diag *diag, sf_arena *arena);

/* Decode mapping `map` (NULL or a null scalar: empty) with `rows` into `base`
 * (zeroed by the caller), applying defaults for absent keys and reporting
 * every problem. Does not call any check function. SF_OK when nothing was
 * wrong, SF_CONFIG when something was reported, SF_ENOMEM. */
sf_status sf_cfg_decode(sf_cfg_ctx *ctx, const sf_config_row *rows, const sf_node *map,
                        void *base);

/* "a.b" + "c" -> "a.b.c"; "" + "c" -> "c"; a `key` starting with '[' is
 * appended without a dot. Arena memory; NULL (and ctx->oom) on no memory. */
const char *sf_cfg_path_join(sf_cfg_ctx *ctx, const char *base, const char *key);
/* ctx->path set to `base` and the index of item `i` ("base[i]"), for
 * decoding the item i of a list at `base`; SF_ENOMEM with ctx->path left at
 * base. The caller sets ctx->path back to base after the item. */
sf_status sf_cfg_path_item(sf_cfg_ctx *ctx, const char *base, size_t i);

/* The closest of `n` candidates to `word` for a did-you-mean hint: a
 * case-insensitive match, else the nearest within edit distance 2. NULL if
 * none is close. */
const char *sf_cfg_suggest(const char *word, const char *const *cands, size_t n);
/* Optimal string alignment distance (a transposition counts as one edit). */
size_t sf_edit_distance(const char *a, const char *b);

/* Parse the YAML text into a node tree in `arena` (anchors, aliases and merge
 * keys resolved, ${env} expanded in scalar values). Problems go to `diag`.
 * On SF_OK *root is a MAP. SF_CONFIG when something was reported: *root is
 * then NULL if the text is not a YAML mapping at all, else the tree (so the
 * caller can go on and report the rest). SF_ENOMEM: *root is NULL. */
sf_status sf_yaml_load(const char *text, size_t len, sf_arena *arena, sf_diag *diag,
                       sf_node **root);

/* Expand ${env:VAR}, ${VAR}, ${env:VAR:-default} and $$ in `in`. On SF_OK
 * *out is arena memory. SF_CONFIG with `err` (arena memory) describing the
 * problem; SF_ENOMEM. */
sf_status sf_env_expand(const char *in, size_t len, sf_arena *arena, char **out,
                        size_t *out_len, char **err);

/* Messages recorded from now on name `file`. */
sf_status sf_diag_set_file(sf_diag *d, const char *file);
/* Messages from now on name `file`, source `source` of a merged config
 * (they sort by source, then position); nodes read from now on belong to
 * it (sf_yaml_load stamps them). */
sf_status sf_diag_set_source(sf_diag *d, const char *file, int source);
const char *sf_diag_file(const sf_diag *d);
int sf_diag_source(const sf_diag *d);
/* Report at a position without a node (YAML syntax errors). */
void sf_diag_error_at(sf_diag *d, int line, int col, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Whether a message could not be stored for lack of memory. */
bool sf_diag_oom(const sf_diag *d);

/* "1h", "1m30s", "250ms", "0s": milliseconds as a duration text. */
void sf_format_duration(int64_t ms, char *buf, size_t size);
/* "64KiB", "10MB", "1000": bytes as a size text (exact units only). */
void sf_format_size(int64_t bytes, char *buf, size_t size);

/* Read a whole file of at most `max` bytes into an sf_malloc'd,
 * NUL-terminated buffer. Problems ("cannot read the file: ...", "the file is
 * larger than N bytes") go to `diag`, whose file name becomes `path`.
 * SF_IO, SF_CONFIG (too large), SF_ENOMEM. */
sf_status sf_config_read_file(const char *path, size_t max, sf_diag *diag, char **out,
                              size_t *out_len);

/* A kind of YAML document the command reads (the config, the policy): its
 * struct, made zeroed at the start of the document's own arena, and how it
 * is loaded once parsed. */
typedef struct sf_document_type {
    size_t size;                    /* the document's struct */
    size_t arena_chunk;
    size_t max_file;                /* the largest file read (sf_document_load_file) */
    bool key_paths;                 /* "a::b" keys are nested maps, as otelcol's --set */
    /* Decode `root` into `doc` with `ctx` (at the tree's top), keeping the
     * arena (everything is in it: freeing it frees the document) and the
     * sources' names `file` where the document wants them; report through
     * ctx. SF_ENOMEM ends the load; anything reported makes it SF_CONFIG. */
    sf_status (*load)(void *doc, sf_arena *arena, char *file, sf_node *root, sf_cfg_ctx *ctx);
} sf_document_type;

/* The loader of every YAML document: the `n` sources `texts` (`lens`
 * bytes), named by `names` in messages (the first also where a message
 * has no node), parsed into one tree (merged in order, with key_paths) in
 * a new arena, and loaded by t->load. On SF_OK *out is the document;
 * SF_CONFIG when anything was reported (then nothing is left), SF_ENOMEM. */
sf_status sf_document_load(const sf_document_type *t, const char *const *names,
                           const char *const *texts, const size_t *lens, size_t n, sf_diag *diag,
                           void **out);
/* The same for the one file `path` (sf_config_read_file: SF_IO too). */
sf_status sf_document_load_file(const sf_document_type *t, const char *path, sf_diag *diag,
                                void **out);

#endif

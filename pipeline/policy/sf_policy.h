/* sf_policy.h: the production policy a config must hold: the allowlist
 * processor and its exact key sets, fail-closed error handling, one traces
 * pipeline through that processor, one dedicated and bounded traces exporter,
 * and optionally the receivers and their addresses. The policy file is YAML
 * (configs/cvm-policy.yaml, documented in configs/POLICY.md), read with the
 * config loader's YAML reader and row decoder, so it is validated as strictly.
 *
 * `spanfence validate --config F --policy P` and `spanfence --config F
 * --policy P` both run sf_policy_check() between sf_config_load() and
 * sf_service_create(). The check runs on configs that loaded: what the loader
 * already refuses (a persistent queue `storage`, an unknown component type
 * in a traces pipeline) is reported by the loader, not here. */
#ifndef SF_POLICY_H
#define SF_POLICY_H

#include <stddef.h>

#include "sf_config.h"
#include "sf_status.h"

typedef struct sf_policy sf_policy;

/* Read and validate the policy file `path`. On SF_OK *out is the policy (the
 * caller owns it: sf_policy_destroy). SF_CONFIG: every problem of the file is
 * in `diag` (named for `path`) and *out is NULL; SF_IO when the file cannot be
 * read (also in diag); SF_ENOMEM. */
sf_status sf_policy_load(const char *path, sf_diag *diag, sf_policy **out);
/* Same, from a string (tests); `name` is the file name in messages. */
sf_status sf_policy_load_string(const char *name, const char *yaml, size_t len, sf_diag *diag,
                                sf_policy **out);
void sf_policy_destroy(sf_policy *policy);

/* Check a loaded config against the policy. Every violation is recorded in
 * `diag` as an error, named for cfg->file, at the node closest to it:
 *   FILE:LINE:COL: policy: <subject>: <what is violated>
 * SF_OK when the policy holds, SF_CONFIG when anything was violated,
 * SF_ENOMEM when a message could not be recorded. */
sf_status sf_policy_check(const sf_policy *policy, const sf_config *cfg, sf_diag *diag);

/* The policy file's name, as given to the load. */
const char *sf_policy_file(const sf_policy *policy);

#endif

/* pipeline/cli/sf_cli.h: the command's own verbs beside the daemon
 * (main.c dispatches them): status and reload (status.c), print-config
 * (print_config.c). argv[0] is the verb; each returns the exit status. */
#ifndef SF_CLI_H
#define SF_CLI_H

#include <stddef.h>
#include <stdio.h>

int sf_cli_status(int argc, char **argv, const char *default_config);
int sf_cli_reload(int argc, char **argv, const char *default_config);
/* The loaded config as YAML on f, defaults filled in, secrets redacted;
 * 0, or 1 when it could not be written. */
struct sf_config;
int sf_print_config(const struct sf_config *cfg, FILE *f);
/* telemetry_push.c: the config layer that runs cfg's periodic reader
 * (service.telemetry.metrics.readers) as a receiver, an exporter and a
 * pipeline, to be merged after every source; sf_malloc'd YAML text (the
 * caller frees it), or NULL: none is needed when err is "", else err says
 * why it cannot be made. */
char *sf_cli_push_layer(const struct sf_config *cfg, char *err, size_t err_size);
/* One line saying what the push does (for the log and validate), or "". */
void sf_cli_push_describe(const struct sf_config *cfg, char *buf, size_t size);

#endif

/* pipeline/cli/sf_cli.h: the command's own verbs beside the daemon
 * (main.c dispatches them): status and reload (status.c), print-config
 * (print_config.c). argv[0] is the verb; each returns the exit status. */
#ifndef SF_CLI_H
#define SF_CLI_H

#include <stdio.h>

int sf_cli_status(int argc, char **argv, const char *default_config);
int sf_cli_reload(int argc, char **argv, const char *default_config);
/* The loaded config as YAML on f, defaults filled in, secrets redacted;
 * 0, or 1 when it could not be written. */
struct sf_config;
int sf_print_config(const struct sf_config *cfg, FILE *f);

#endif

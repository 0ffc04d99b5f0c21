/* tests/fuzz/fuzz_config.c: libFuzzer target for the config loader: bytes
 * as a YAML file through libyaml, the node reader (aliases, merge keys,
 * ${env}), the row decoder, every component check and the transform
 * statement parser; loading and destroying must give back every byte. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sf_alloc.h"
#include "sf_config.h"
#include "sf_log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int once;
    size_t before;
    char *yaml;
    sf_diag *diag;
    sf_config *cfg = NULL;
    sf_status st;

    if (!once) {
        once = 1;
        sf_log_set_level(SF_LOG_OFF);
        /* Configs may name these; set so both the set and unset paths run. */
        setenv("SPANFENCE_FUZZ_SET", "127.0.0.1:4317", 1);
    }
    before = sf_alloc_in_use();
    /* An exact-size copy without a terminator: ASan sees any read past len. */
    yaml = malloc(size ? size : 1);
    if (yaml == NULL)
        abort();
    memcpy(yaml, data, size);
    diag = sf_diag_create("fuzz.yaml");
    if (diag == NULL)
        abort();
    st = sf_config_load_string("fuzz.yaml", yaml, size, diag, &cfg);
    if (st == SF_OK) {
        if (cfg == NULL || sf_diag_errors(diag) != 0) {
            fprintf(stderr, "config: SF_OK with cfg %p and %zu errors\n", (void *)cfg,
                    sf_diag_errors(diag));
            abort();
        }
    } else if (st == SF_CONFIG) {
        if (cfg != NULL || sf_diag_errors(diag) == 0) {
            fprintf(stderr, "config: SF_CONFIG with cfg %p and no error message\n", (void *)cfg);
            abort();
        }
    } else if (st != SF_ENOMEM) {
        fprintf(stderr, "config: unexpected status %s\n", sf_status_name(st));
        abort();
    }
    /* Every message is a complete string. */
    for (size_t i = 0; i < sf_diag_count(diag); i++) {
        if (sf_diag_message(diag, i) == NULL)
            abort();
        (void)strlen(sf_diag_message(diag, i));
    }
    sf_config_destroy(cfg);
    sf_diag_destroy(diag);
    free(yaml);
    if (sf_alloc_in_use() != before) {
        fprintf(stderr, "config: %zu bytes leaked (%s)\n", sf_alloc_in_use() - before,
                sf_status_name(st));
        abort();
    }
    return 0;
}

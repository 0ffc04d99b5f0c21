/* sf_libcurl.h: libcurl, loaded when a config uses it.
 *
 * No spanfence program links libcurl. Debian's libcurl brings ~30
 * libraries with it (OpenSSL, GnuTLS through librtmp and libldap, Kerberos,
 * SASL, libssh2, libpsl, brotli), and loading and relocating them, then
 * curl_global_init's OpenSSL set-up, was 7 ms of a start and 5 MiB of idle
 * RSS in a collector whose config exports nothing over HTTP (bench/README.md,
 * Start-up). sf_libcurl.c defines every curl_* function spanfence calls as a
 * forwarder to libcurl.so.4, opened (dlopen, RTLD_NOW) and initialised
 * (curl_global_init) once, by the first call of any of them or of
 * sf_libcurl_load. Callers keep calling libcurl's API as documented, with
 * <curl/curl.h>'s type checks.
 *
 * When libcurl cannot be loaded, the functions that make something
 * (curl_easy_init, curl_multi_init, curl_url, curl_slist_append,
 * curl_easy_escape) return NULL, curl_global_init returns CURLE_FAILED_INIT,
 * curl_easy_strerror says libcurl is missing, and the others, which need
 * such a handle, are not reached. A component that needs libcurl calls
 * sf_libcurl_load when it is created, so that a missing library is a
 * config-time error, not a failed call. */
#ifndef SF_LIBCURL_H
#define SF_LIBCURL_H

#include "sf_status.h"

/* Loads and initialises libcurl once (thread-safe: sf_dl_api); the
 * main thread calls it before the components start, from the create of a
 * component that uses libcurl. SF_IO when libcurl.so.4 (Debian: libcurl4)
 * or one of its functions is missing, or curl_global_init fails; the
 * reason in sf_libcurl_error(). */
sf_status sf_libcurl_load(void);

/* Why the load failed ("" when it did not, or has not been tried). */
const char *sf_libcurl_error(void);

#endif

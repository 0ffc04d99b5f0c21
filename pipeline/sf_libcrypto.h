/* sf_libcrypto.h: OpenSSL's libcrypto, loaded when something hashes.
 *
 * spanfence hashes in two places: the transform processor's pseudonyms
 * (HMAC-SHA256 on SHA256_CTX, set up when the processor is created with a
 * pseudonym_key) and the allowlist digest of the status document (SHA-256,
 * made when /status is asked). Linking libcrypto cost 1.4 MiB of idle RSS
 * (its relocated tables) and about a millisecond of every start, in a
 * config that does neither (bench/README.md, Start-up). sf_libcrypto.c
 * defines the libcrypto functions spanfence calls as forwarders to
 * libcrypto.so.3, opened (dlopen, RTLD_NOW) once by the first of them.
 *
 * It fails closed: a hash asked for when libcrypto cannot be loaded ends
 * the process with the reason (it is asked at create or in a status
 * request, never with data in flight, and an unhashed pseudonym must not
 * leave). OPENSSL_cleanse without libcrypto loaded is explicit_bzero: a
 * wipe needs no library. The package depends on libssl3 (Debian's
 * package of libcrypto.so.3). */
#ifndef SF_LIBCRYPTO_H
#define SF_LIBCRYPTO_H

/* Nothing to call: libcrypto's own functions are the interface. */

#endif

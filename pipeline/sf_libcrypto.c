/* sf_libcrypto.c: the libcrypto functions spanfence calls, forwarded to
 * libcrypto.so.3 loaded on first use (sf_libcrypto.h says why and how it
 * fails). A function not defined here is an undefined reference at link
 * time; the definitions do not interpose on libcrypto's own calls (no
 * linked library refers to them, so the program does not export them; the
 * library is opened RTLD_LOCAL). A test that calls libcrypto itself (an
 * independent HMAC) links it, and then both resolve to the same library. */
#define _GNU_SOURCE             /* explicit_bzero */
#define OPENSSL_SUPPRESS_DEPRECATED     /* SHA256_Init & co., as transform.c */
#include "sf_libcrypto.h"

#include "sf_dl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

/* Debian's libssl3 (the package libssl-dev's runtime) */
#define SF_LIBCRYPTO_SONAME "libcrypto.so.3"

#define SF_CRYPTO_FUNCS(X) \
    X(OPENSSL_cleanse) X(EVP_Digest) X(EVP_sha256) \
    X(SHA256) X(SHA256_Init) X(SHA256_Update) X(SHA256_Final)

struct sf_crypto_fns {
    SF_CRYPTO_FUNCS(SF_DL_FIELD)
};
#define SF_DL_FNS struct sf_crypto_fns

static struct sf_crypto_fns fns;

static const sf_dl_sym syms[] = {
    SF_CRYPTO_FUNCS(SF_DL_ROW)
    { NULL, 0 }
};

static sf_dl_lib lib = SF_DL_LIB(SF_LIBCRYPTO_SONAME, "libssl3", syms, &fns, NULL);

static const struct sf_crypto_fns *api(void)
{
    const struct sf_crypto_fns *f = sf_dl_api(&lib);

    if (f == NULL) {
        fprintf(stderr, "spanfence: %s, needed to hash\n", lib.error);
        abort();
    }
    return f;
}

void OPENSSL_cleanse(void *ptr, size_t len)
{
    if (sf_dl_loaded(&lib))
        fns.OPENSSL_cleanse(ptr, len);
    else
        explicit_bzero(ptr, len);
}

int EVP_Digest(const void *data, size_t count, unsigned char *md, unsigned int *size,
               const EVP_MD *type, ENGINE *impl)
{
    return api()->EVP_Digest(data, count, md, size, type, impl);
}

const EVP_MD *EVP_sha256(void)
{
    return api()->EVP_sha256();
}

unsigned char *SHA256(const unsigned char *d, size_t n, unsigned char *md)
{
    return api()->SHA256(d, n, md);
}

int SHA256_Init(SHA256_CTX *c)
{
    return api()->SHA256_Init(c);
}

int SHA256_Update(SHA256_CTX *c, const void *data, size_t len)
{
    return api()->SHA256_Update(c, data, len);
}

int SHA256_Final(unsigned char *md, SHA256_CTX *c)
{
    return api()->SHA256_Final(md, c);
}

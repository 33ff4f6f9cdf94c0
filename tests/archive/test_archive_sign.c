/* Signed bundles in the library (src/archive/archive_sign.c,
 * archive_verify.c): export with a signing key, progcache_archive_verify
 * and a verified import with the public key, older callers' structs,
 * bad keys, and a tampered archive refused before anything is written, by
 * path and through a pipe; bytes after the end-of-archive blocks other
 * than zero padding refused at their offset (issue 29). */
#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "archive/archive_sign.h"

typedef struct pem_pair {
    char priv[512], pub[512];
    size_t priv_len, pub_len;
    char signer[65];
} pem_pair;

static size_t bio_text(BIO *bio, char *out, size_t cap)
{
    char *data;
    long n = BIO_get_mem_data(bio, &data);
    CHECK(n > 0 && (size_t)n < cap);
    memcpy(out, data, (size_t)n);
    BIO_free(bio);
    return (size_t)n;
}

static void make_key(pem_pair *k, int type)
{
    EVP_PKEY *key = type == EVP_PKEY_ED25519 ? EVP_PKEY_Q_keygen(NULL, NULL, "ED25519")
                                             : EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    CHECK(key != NULL);
    BIO *a = BIO_new(BIO_s_mem()), *b = BIO_new(BIO_s_mem());
    CHECK(PEM_write_bio_PrivateKey(a, key, NULL, NULL, 0, NULL, NULL) == 1);
    CHECK(PEM_write_bio_PUBKEY(b, key) == 1);
    k->priv_len = bio_text(a, k->priv, sizeof k->priv);
    k->pub_len = bio_text(b, k->pub, sizeof k->pub);
    unsigned char raw[32];
    size_t len = sizeof raw;
    if (type == EVP_PKEY_ED25519) {
        unsigned char hash[32];
        unsigned int hl = 0;
        CHECK(EVP_PKEY_get_raw_public_key(key, raw, &len) == 1);
        CHECK(EVP_Digest(raw, len, hash, &hl, EVP_sha256(), NULL) == 1);
        for (int i = 0; i < 32; i++)
            snprintf(k->signer + 2 * i, 3, "%02x", hash[i]);
    }
    EVP_PKEY_free(key);
}

static void fill(const char *dir)
{
    progcache_store *fs;
    CHECK_OK(progcache_store_file_new(&fs, dir, NULL));
    for (int i = 0; i < 5; i++) {
        char key[16], text[128];
        snprintf(key, sizeof key, "key-%d", i);
        int len = snprintf(text, sizeof text, "//%d\n.version 8.0\n.target sm_90\n", i);
        CHECK_OK(progcache_store_put(fs, key, strlen(key), text, (size_t)len));
    }
    progcache_store_free(fs);
}

static size_t count_entries(const char *dir)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/entries", dir);
    DIR *d = opendir(path);
    size_t n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char sub[1400];
        snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
        DIR *s = opendir(sub);
        for (struct dirent *f; s && (f = readdir(s));)
            n += f->d_name[0] != '.';
        if (s)
            closedir(s);
    }
    if (d)
        closedir(d);
    return n;
}

static int export_signed(const char *src, const char *archive, const pem_pair *k)
{
    progcache_store *fs;
    CHECK_OK(progcache_store_file_new(&fs, src, NULL));
    progcache_archive_options o = PROGCACHE_ARCHIVE_OPTIONS_INIT;
    o.sign_key = k->priv;
    o.sign_key_len = k->priv_len;
    o.nvrtc_version = "13.0";
    int rc = progcache_file_export(NULL, progcache_store_as_file(fs), archive, &o);
    progcache_store_free(fs);
    return rc;
}

static int import_verified(const char *dir, int fd, const char *path, const pem_pair *k,
                           progcache_archive_result *res)
{
    progcache_store *fs;
    CHECK_OK(progcache_store_file_new(&fs, dir, NULL));
    progcache_archive_options o = PROGCACHE_ARCHIVE_OPTIONS_INIT;
    o.verify_key = k->pub;
    o.verify_key_len = k->pub_len;
    int rc = path ? progcache_file_import(res, progcache_store_as_file(fs), path, &o)
                  : progcache_file_import_fd(res, progcache_store_as_file(fs), fd, "pipe", &o);
    progcache_store_free(fs);
    return rc;
}

static void test_sign_and_verify(const char *work, const pem_pair *k, const pem_pair *other)
{
    char src[1024], archive[1100], dst[1100];
    snprintf(src, sizeof src, "%s/src", work);
    snprintf(archive, sizeof archive, "%s/bundle.tar", work);
    fill(src);
    CHECK_OK(export_signed(src, archive, k));

    progcache_archive_result res = PROGCACHE_ARCHIVE_RESULT_INIT;
    progcache_archive_options o = PROGCACHE_ARCHIVE_OPTIONS_INIT;
    o.verify_key = k->pub;
    o.verify_key_len = k->pub_len;
    CHECK_OK(progcache_archive_verify(&res, archive, 0, &o));
    CHECK(res.verified == 1 && res.entries == 5);
    CHECK(!strcmp(res.signer, k->signer));
    CHECK(!strcmp(res.nvrtc_version, "13.0"));

    /* Another key: refused, and the message says so. */
    o.verify_key = other->pub;
    o.verify_key_len = other->pub_len;
    CHECK_RC(PROGCACHE_ECORRUPT, progcache_archive_verify(&res, archive, 0, &o));
    CHECK(strstr(progcache_error_last(), "another key") != NULL);

    /* A verified import; a version 1 result (an older caller) is filled
     * only as far as it reaches. */
    snprintf(dst, sizeof dst, "%s/dst", work);
    progcache_archive_result v1 = PROGCACHE_ARCHIVE_RESULT_INIT;
    v1.version = 1;
    v1.verified = 7; /* beyond a version 1 struct: left alone */
    CHECK_OK(import_verified(dst, -1, archive, k, &v1));
    CHECK(v1.entries == 5 && v1.verified == 7);
    CHECK(count_entries(dst) == 5);

    /* A version 2 options struct (no key fields) imports a signed bundle
     * as an ordinary archive, skipping its two members. */
    progcache_archive_options old = PROGCACHE_ARCHIVE_OPTIONS_INIT;
    old.version = 2;
    progcache_store *fs;
    snprintf(dst, sizeof dst, "%s/dst-old", work);
    CHECK_OK(progcache_store_file_new(&fs, dst, NULL));
    res = (progcache_archive_result)PROGCACHE_ARCHIVE_RESULT_INIT;
    CHECK_OK(progcache_file_import(&res, progcache_store_as_file(fs), archive, &old));
    CHECK(res.entries == 5 && res.verified == 0);
    progcache_store_free(fs);

    /* verify without a key, or a version 2 struct that cannot carry one. */
    CHECK_RC(PROGCACHE_EINVAL, progcache_archive_verify(NULL, archive, 0, &old));
    CHECK(strstr(progcache_error_last(), "verify_key") != NULL);
    CHECK_RC(PROGCACHE_EINVAL, progcache_archive_verify(NULL, archive, 0, NULL));
}

static void test_tampered(const char *work, const pem_pair *k)
{
    char archive[1100], bad[1100], dst[1100];
    snprintf(archive, sizeof archive, "%s/bundle.tar", work);
    snprintf(bad, sizeof bad, "%s/bad.tar", work);
    size_t size;
    char *bytes = test_read_file(archive, &size);
    CHECK(bytes && size > 2048);
    bytes[TAR_BLOCK + 3] ^= 1; /* the first entry's data */
    int fd = open(bad, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0 && write(fd, bytes, size) == (ssize_t)size);
    close(fd);

    snprintf(dst, sizeof dst, "%s/dst-bad", work);
    CHECK_RC(PROGCACHE_ECORRUPT, import_verified(dst, -1, bad, k, NULL));
    CHECK(strstr(progcache_error_last(), "nothing imported") != NULL);
    CHECK(count_entries(dst) == 0);

    /* Through a pipe, read once: the same. */
    int p[2];
    CHECK(pipe(p) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        ssize_t w = write(p[1], bytes, size);
        _exit(w == (ssize_t)size ? 0 : 1);
    }
    close(p[1]);
    snprintf(dst, sizeof dst, "%s/dst-pipe", work);
    CHECK_RC(PROGCACHE_ECORRUPT, import_verified(dst, p[0], NULL, k, NULL));
    CHECK(count_entries(dst) == 0);
    close(p[0]);
    int status;
    waitpid(pid, &status, 0);
    free(bytes);
}

static void test_bad_keys(const char *work, const pem_pair *k)
{
    char src[1024], archive[1100];
    snprintf(src, sizeof src, "%s/src", work);
    snprintf(archive, sizeof archive, "%s/never.tar", work);
    pem_pair ec, garbage;
    make_key(&ec, EVP_PKEY_EC);
    CHECK_RC(PROGCACHE_EINVAL, export_signed(src, archive, &ec));
    CHECK(strstr(progcache_error_last(), "Ed25519") != NULL);
    memset(&garbage, 0, sizeof garbage);
    garbage.priv_len = (size_t)snprintf(garbage.priv, sizeof garbage.priv,
                                        "-----BEGIN PRIVATE KEY-----\n!!\n-----END PRIVATE KEY-----\n");
    CHECK_RC(PROGCACHE_EINVAL, export_signed(src, archive, &garbage));
    CHECK(strstr(progcache_error_last(), "not a PEM private key") != NULL);
    struct stat st;
    CHECK(stat(archive, &st) != 0); /* nothing written */

    /* The private half where the public one belongs. */
    char bundle[1100];
    snprintf(bundle, sizeof bundle, "%s/bundle.tar", work);
    progcache_archive_options o = PROGCACHE_ARCHIVE_OPTIONS_INIT;
    o.verify_key = k->priv;
    o.verify_key_len = k->priv_len;
    CHECK_RC(PROGCACHE_EINVAL, progcache_archive_verify(NULL, bundle, 0, &o));
    CHECK(strstr(progcache_error_last(), "not a PEM public key") != NULL);
    o.verify_key = ec.pub;
    o.verify_key_len = ec.pub_len;
    CHECK_RC(PROGCACHE_EINVAL, progcache_archive_verify(NULL, bundle, 0, &o));
}

/* bundle.tar with tail appended (tail_len bytes) as bad.tar; verified:
 * the return code. */
static int verify_with_tail(const char *work, const pem_pair *k, const void *tail,
                            size_t tail_len, size_t *at)
{
    char archive[1100], bad[1100];
    snprintf(archive, sizeof archive, "%s/bundle.tar", work);
    snprintf(bad, sizeof bad, "%s/tail.tar", work);
    size_t size;
    char *bytes = test_read_file(archive, &size);
    CHECK(bytes != NULL);
    *at = size;
    int fd = open(bad, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0 && write(fd, bytes, size) == (ssize_t)size);
    CHECK(write(fd, tail, tail_len) == (ssize_t)tail_len && close(fd) == 0);
    free(bytes);
    progcache_archive_options o = PROGCACHE_ARCHIVE_OPTIONS_INIT;
    o.verify_key = k->pub;
    o.verify_key_len = k->pub_len;
    progcache_archive_result res = PROGCACHE_ARCHIVE_RESULT_INIT;
    return progcache_archive_verify(&res, bad, 0, &o);
}

static void refused_at(int rc, size_t at, const char *says)
{
    char where[64];
    snprintf(where, sizeof where, "(at byte %zu)", at);
    if (rc != PROGCACHE_ECORRUPT || !strstr(progcache_error_last(), where) ||
        !strstr(progcache_error_last(), says))
        fprintf(stderr, "rc %d, message \"%s\", want %s and %s\n", rc, progcache_error_last(),
                where, says);
    CHECK(rc == PROGCACHE_ECORRUPT);
    CHECK(strstr(progcache_error_last(), where) && strstr(progcache_error_last(), says));
}

/* Nothing but zero bytes may follow the signed part's end blocks. */
static void test_appended(const char *work, const pem_pair *k)
{
    size_t at;
    static const char garbage[] = "garbage";
    int rc = verify_with_tail(work, k, garbage, sizeof garbage - 1, &at);
    refused_at(rc, at, "not zero");

    /* A whole member after the end blocks: what tar -t lists. */
    unsigned char member[4 * TAR_BLOCK];
    memset(member, 0, sizeof member);
    CHECK(progcache__tar_make(member, "extra.txt", 6, 0) == 0);
    memcpy(member + TAR_BLOCK, "extra\n", 6);
    rc = verify_with_tail(work, k, member, sizeof member, &at);
    refused_at(rc, at, "not zero");

    /* A zero byte, then garbage: the offset is the first that is not zero. */
    unsigned char late[3 * TAR_BLOCK];
    memset(late, 0, sizeof late);
    late[sizeof late - 1] = 'x';
    rc = verify_with_tail(work, k, late, sizeof late, &at);
    refused_at(rc, at + sizeof late - 1, "not zero");

    /* tar's record padding, or more zeros up to 1 MiB: still the bundle. */
    unsigned char *zeros = calloc(1, (2u << 20) + 1);
    CHECK(zeros != NULL);
    CHECK_OK(verify_with_tail(work, k, zeros, 10240, &at));
    CHECK_OK(verify_with_tail(work, k, zeros, (1u << 20) - 16384, &at));
    rc = verify_with_tail(work, k, zeros, 2u << 20, &at);
    CHECK(rc == PROGCACHE_ECORRUPT && strstr(progcache_error_last(), "1 MiB"));
    free(zeros);

    /* Through a pipe (a stream read once): the same refusal. */
    char bad[1100], dst[1100];
    snprintf(bad, sizeof bad, "%s/tail.tar", work);
    verify_with_tail(work, k, garbage, sizeof garbage - 1, &at);
    size_t size;
    char *bytes = test_read_file(bad, &size);
    int p[2];
    CHECK(bytes && pipe(p) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        ssize_t w = write(p[1], bytes, size);
        _exit(w == (ssize_t)size ? 0 : 1);
    }
    close(p[1]);
    snprintf(dst, sizeof dst, "%s/dst-tail", work);
    refused_at(import_verified(dst, p[0], NULL, k, NULL), at, "not zero");
    CHECK(count_entries(dst) == 0);
    close(p[0]);
    waitpid(pid, NULL, 0);
    free(bytes);
}

int main(void)
{
    char *work = test_mkdtemp("arcsign");
    pem_pair k, other;
    make_key(&k, EVP_PKEY_ED25519);
    make_key(&other, EVP_PKEY_ED25519);
    test_sign_and_verify(work, &k, &other);
    test_tampered(work, &k);
    test_appended(work, &k);
    test_bad_keys(work, &k);
    test_rmdtemp(work);
    puts("test_archive_sign: ok");
    return 0;
}

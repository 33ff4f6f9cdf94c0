/* progcache_key_nvrtc and friends: argument checks, what changes a key and
 * what does not, the NVRTC version read at run time, digests over files,
 * and allocation failure. The cuda.core vectors are in test_key_vectors.c. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "check.h"
#include "key_fixture.h"
#include "sha256.h"

static const char *const source = "extern \"C\" __global__ void k(int *a){ *a = 1; }\n";
static progcache_key_nvrtc_options base(void) { return fixture_key_options(source); }

static void key_of(unsigned char out[PROGCACHE_KEY_SIZE], const progcache_key_nvrtc_options *o)
{
    CHECK_OK(progcache_key_nvrtc(out, o));
}

static int same(const unsigned char *a, const unsigned char *b)
{
    return !memcmp(a, b, PROGCACHE_KEY_SIZE);
}

/* The recipe, written out independently of the library: label, 8-byte
 * big-endian length, payload. */
static void put_field(progcache__sha256 *h, const char *label, const void *data, size_t len)
{
    unsigned char be[8];
    for (int i = 0; i < 8; i++)
        be[i] = (unsigned char)((uint64_t)len >> (56 - 8 * i));
    CHECK_OK(progcache__sha256_update(h, label, strlen(label)));
    CHECK_OK(progcache__sha256_update(h, be, 8));
    CHECK_OK(progcache__sha256_update(h, data, len));
}

static void put_str(progcache__sha256 *h, const char *label, const char *text)
{
    put_field(h, label, text, strlen(text));
}

static void test_targets(void)
{
    progcache_target t;
    static const char *const names[] = {"cubin", "ptx", "ltoir"};
    for (int i = 0; i < 3; i++) {
        CHECK(!strcmp(progcache_target_name((progcache_target)i), names[i]));
        CHECK_OK(progcache_target_parse(&t, names[i]));
        CHECK((int)t == i);
    }
    CHECK(progcache_target_name((progcache_target)3) == NULL);
    CHECK(progcache_target_name((progcache_target)-1) == NULL);
    CHECK_RC(PROGCACHE_EINVAL, progcache_target_parse(&t, "fatbin"));
    CHECK(strstr(progcache_error_last(), "fatbin") != NULL);
    CHECK_RC(PROGCACHE_EINVAL, progcache_target_parse(&t, NULL));
    CHECK_RC(PROGCACHE_EINVAL, progcache_target_parse(NULL, "ptx"));
}

static void test_options_init(void)
{
    progcache_key_nvrtc_options o;
    memset(&o, 0xAB, sizeof o);
    progcache_key_nvrtc_options_init(&o);
    CHECK(o.version == PROGCACHE_KEY_NVRTC_OPTIONS_VERSION);
    CHECK(o.source == NULL && o.num_options == 0 && o.extra_digest == NULL);
    CHECK(o.nvrtc_major == 0 && o.nvrtc_minor == 0 && o.target == PROGCACHE_TARGET_CUBIN);
    progcache_key_nvrtc_options_init(NULL);
}

static void test_invalid_arguments(void)
{
    unsigned char key[PROGCACHE_KEY_SIZE];
    progcache_key_nvrtc_options o = base();
    const char *with_null[] = {"-arch=sm_90", NULL};
    const char *null_name[] = {"f<1>", NULL};

    CHECK_RC(PROGCACHE_EINVAL, progcache_key_nvrtc(key, NULL));
    CHECK_RC(PROGCACHE_EINVAL, progcache_key_nvrtc(NULL, &o));
    o.version = 0;
    CHECK_RC(PROGCACHE_EINVAL, progcache_key_nvrtc(key, &o));
    CHECK(strstr(progcache_error_last(), "version 0") != NULL);
    o.version = PROGCACHE_KEY_NVRTC_OPTIONS_VERSION + 1;
    CHECK_RC(PROGCACHE_EINVAL, progcache_key_nvrtc(key, &o));
    o = base();
    o.source = NULL;
    CHECK_RC(PROGCACHE_EINVAL, progcache_key_nvrtc(key, &o));
    CHECK(strstr(progcache_error_last(), "source") != NULL);
    o = base();
    o.target = (progcache_target)7;
    CHECK_RC(PROGCACHE_EINVAL, progcache_key_nvrtc(key, &o));
    o.target = (progcache_target)-1;
    CHECK_RC(PROGCACHE_EINVAL, progcache_key_nvrtc(key, &o));
    o = base();
    o.options = NULL;
    CHECK_RC(PROGCACHE_EINVAL, progcache_key_nvrtc(key, &o));
    o.options = with_null;
    o.num_options = 2;
    CHECK_RC(PROGCACHE_EINVAL, progcache_key_nvrtc(key, &o));
    CHECK(strstr(progcache_error_last(), "option string 1") != NULL);
    o = base();
    o.num_name_expressions = 1;
    CHECK_RC(PROGCACHE_EINVAL, progcache_key_nvrtc(key, &o));
    o.name_expressions = null_name;
    o.num_name_expressions = 2;
    CHECK_RC(PROGCACHE_EINVAL, progcache_key_nvrtc(key, &o));
    o = base();
    o.extra_digest_len = 4;
    CHECK_RC(PROGCACHE_EINVAL, progcache_key_nvrtc(key, &o));
    /* NVRTC version: both or neither, never negative; 13.0 itself is fine. */
    static const int bad[][2] = {{0, 1}, {-1, 0}, {13, -1}, {-13, -2}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o = base();
        o.nvrtc_major = bad[i][0];
        o.nvrtc_minor = bad[i][1];
        CHECK_RC(PROGCACHE_EINVAL, progcache_key_nvrtc(key, &o));
        CHECK(strstr(progcache_error_last(), "NVRTC version") != NULL);
    }
}

/* Each input the key covers changes it; inputs it does not cover don't. */
static void test_what_changes_the_key(void)
{
    unsigned char k0[PROGCACHE_KEY_SIZE], k[PROGCACHE_KEY_SIZE];
    progcache_key_nvrtc_options o = base();
    const char *two[] = {"-arch=sm_90", "--std=c++17"};
    const char *two_swapped[] = {"--std=c++17", "-arch=sm_90"};
    static const unsigned char d1[] = {1, 2, 3};

    key_of(k0, &o);
    key_of(k, &o);
    CHECK(same(k0, k)); /* deterministic */

    o.target = PROGCACHE_TARGET_PTX;
    key_of(k, &o);
    CHECK(!same(k0, k));
    o = base();
    o.nvrtc_minor = 1;
    key_of(k, &o);
    CHECK(!same(k0, k));
    o = base();
    o.name = "default_program"; /* NULL means exactly this name */
    key_of(k, &o);
    CHECK(same(k0, k));
    o.name = "other.cu";
    key_of(k, &o);
    CHECK(!same(k0, k));
    o = base();
    o.source_len = strlen(source); /* 0 means strlen */
    key_of(k, &o);
    CHECK(same(k0, k));
    o.source_len = strlen(source) - 1;
    key_of(k, &o);
    CHECK(!same(k0, k));

    /* Option order is kept: NVRTC lets a later option override an earlier. */
    unsigned char ka[PROGCACHE_KEY_SIZE], kb[PROGCACHE_KEY_SIZE];
    o = base();
    o.options = two;
    o.num_options = 2;
    key_of(ka, &o);
    o.options = two_swapped;
    key_of(kb, &o);
    CHECK(!same(ka, kb));

    /* Bytes after a NUL in the source count when source_len says so. */
    static const char with_nul[] = "int a;\0int b;";
    o = base();
    o.source = with_nul;
    o.source_len = sizeof with_nul - 1;
    key_of(ka, &o);
    o.source_len = 0;
    key_of(kb, &o);
    CHECK(!same(ka, kb));

    /* A digest, even an empty one, is a field of its own. */
    o = base();
    o.extra_digest = d1;
    o.extra_digest_len = sizeof d1;
    key_of(ka, &o);
    CHECK(!same(k0, ka));
    o.extra_digest_len = 0;
    key_of(kb, &o);
    CHECK(!same(k0, kb) && !same(ka, kb));
}

static void test_name_expressions(void)
{
    unsigned char k1[PROGCACHE_KEY_SIZE], k2[PROGCACHE_KEY_SIZE], k3[PROGCACHE_KEY_SIZE];
    const char *abc[] = {"t<1>", "t<3>", "t<2>"};
    const char *cba[] = {"t<2>", "t<3>", "t<1>"};
    const char *one[] = {"t<1>"};
    const char *dup[] = {"t<1>", "t<1>"};
    progcache_key_nvrtc_options o = base();

    o.name_expressions = abc;
    o.num_name_expressions = 3;
    key_of(k1, &o);
    o.name_expressions = cba;
    key_of(k2, &o);
    CHECK(same(k1, k2)); /* order does not matter */
    o.name_expressions_are_bytes = 1;
    key_of(k3, &o);
    CHECK(!same(k1, k3)); /* b: differs from s: */

    o = base();
    o.name_expressions = one;
    o.num_name_expressions = 1;
    key_of(k1, &o);
    o.name_expressions = dup;
    o.num_name_expressions = 2;
    key_of(k2, &o);
    CHECK(!same(k1, k2)); /* duplicates count, as in cuda.core's sorted tuple */
    o.num_name_expressions = 0;
    key_of(k3, &o);
    CHECK(!same(k1, k3));

    /* Bytewise order, shorter first on a common prefix, bytes >= 0x80
     * after ASCII: compare with the recipe written out by hand. */
    const char *mixed[] = {"\xc3\xa9", "ab", "a", "B"};
    const char *sorted[] = {"s:B", "s:a", "s:ab", "s:\xc3\xa9"};
    o = base();
    o.name_expressions = mixed;
    o.num_name_expressions = 4;
    key_of(k1, &o);
    progcache__sha256 *h = progcache__sha256_new();
    CHECK(h != NULL);
    put_str(h, "schema", "2");
    put_str(h, "nvrtc", "13.0");
    put_str(h, "code_type", "c++");
    put_str(h, "target_type", "cubin");
    put_str(h, "code", source);
    put_str(h, "option_count", "1");
    put_str(h, "option", "-arch=sm_90");
    put_str(h, "names_count", "4");
    for (int i = 0; i < 4; i++)
        put_str(h, "name", sorted[i]);
    put_str(h, "options_name", "default_program");
    CHECK_OK(progcache__sha256_final(h, k2));
    CHECK(same(k1, k2));
}

typedef struct version_result {
    int rc, major, minor;
} version_result;

static void *read_version(void *arg)
{
    version_result *r = arg;
    r->rc = progcache_nvrtc_version(&r->major, &r->minor);
    return NULL;
}

static void test_nvrtc_version(void)
{
    int major = 0, minor = -1;
    unsigned char k_runtime[PROGCACHE_KEY_SIZE], k_fixed[PROGCACHE_KEY_SIZE];

    CHECK_OK(progcache_nvrtc_version(&major, &minor));
    printf("NVRTC version read at run time: %d.%d\n", major, minor);
    CHECK(major >= 12 && minor >= 0);
    CHECK_RC(PROGCACHE_EINVAL, progcache_nvrtc_version(NULL, &minor));

    /* The file it came from (loaded now): a libnvrtc, named. */
    progcache_buf lib = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache_nvrtc_library(&lib));
    CHECK(lib.size > 0 && strstr((const char *)lib.data, "libnvrtc"));
    CHECK(strlen((const char *)lib.data) == lib.size);
    progcache_buf_free(&lib);
    CHECK_RC(PROGCACHE_EINVAL, progcache_nvrtc_library(NULL));

    /* Threads racing for the first read all see the same answer. */
    pthread_t threads[4];
    version_result r[4];
    for (int i = 0; i < 4; i++)
        CHECK(pthread_create(&threads[i], NULL, read_version, &r[i]) == 0);
    for (int i = 0; i < 4; i++) {
        CHECK(pthread_join(threads[i], NULL) == 0);
        CHECK(r[i].rc == PROGCACHE_OK && r[i].major == major && r[i].minor == minor);
    }

    /* 0/0 in the options means exactly the loaded version. */
    progcache_key_nvrtc_options o = base();
    o.nvrtc_major = 0;
    o.nvrtc_minor = 0;
    key_of(k_runtime, &o);
    o.nvrtc_major = major;
    o.nvrtc_minor = minor;
    key_of(k_fixed, &o);
    CHECK(same(k_runtime, k_fixed));
    o.nvrtc_major = major + 1;
    key_of(k_fixed, &o);
    CHECK(!same(k_runtime, k_fixed));
}

static void test_hex(void)
{
    unsigned char key[PROGCACHE_KEY_SIZE], back[PROGCACHE_KEY_SIZE];
    char hex[2 * PROGCACHE_KEY_SIZE + 1];
    for (int i = 0; i < PROGCACHE_KEY_SIZE; i++)
        key[i] = (unsigned char)(i * 37 + 250);
    progcache_key_hex(hex, key, sizeof key);
    CHECK(strlen(hex) == 64);
    CHECK(!strncmp(hex, "fa1f44", 6)); /* lowercase, high nibble first */
    CHECK_OK(progcache_key_from_hex(back, hex));
    CHECK(same(key, back));
    for (char *p = hex; *p; p++)
        if (*p >= 'a' && *p <= 'f')
            *p = (char)(*p - 'a' + 'A');
    CHECK_OK(progcache_key_from_hex(back, hex)); /* uppercase accepted */
    CHECK(same(key, back));
    hex[10] = 'g';
    CHECK_RC(PROGCACHE_EINVAL, progcache_key_from_hex(back, hex));
    CHECK(strstr(progcache_error_last(), "position 11") != NULL);
    CHECK_RC(PROGCACHE_EINVAL, progcache_key_from_hex(back, "abcd"));
    CHECK_RC(PROGCACHE_EINVAL, progcache_key_from_hex(back, NULL));
    progcache_key_hex(hex, key, 2);
    CHECK(!strcmp(hex, "fa1f"));
}

/* ---- digest over files ---------------------------------------------------- */

static void write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    CHECK(fwrite(data, 1, len, f) == len);
    CHECK(fclose(f) == 0);
}

static void digest(unsigned char out[PROGCACHE_KEY_SIZE], const char *a, const char *b)
{
    const char *paths[] = {a, b};
    CHECK_OK(progcache_digest_files(out, paths, b ? 2 : 1));
}

static void test_digest_files(void)
{
    char *dir = test_mkdtemp("key-digest");
    char a[4200], b[4200], c[4200], big[4200], missing[4200];
    unsigned char d0[PROGCACHE_KEY_SIZE], d[PROGCACHE_KEY_SIZE];
    snprintf(a, sizeof a, "%s/a.h", dir);
    snprintf(b, sizeof b, "%s/b.h", dir);
    snprintf(c, sizeof c, "%s/c.h", dir);
    snprintf(big, sizeof big, "%s/big.h", dir);
    snprintf(missing, sizeof missing, "%s/missing.h", dir);

    write_file(a, "#define A 1\n", 12);
    write_file(b, "#define B 2\n", 12);
    write_file(c, "#define A 1\n", 12); /* same bytes as a, another path */
    digest(d0, a, b);
    digest(d, a, b);
    CHECK(same(d0, d));

    digest(d, b, a); /* order */
    CHECK(!same(d0, d));
    digest(d, c, b); /* path */
    CHECK(!same(d0, d));
    write_file(a, "#define A 2\n", 12); /* one byte */
    digest(d, a, b);
    CHECK(!same(d0, d));
    write_file(a, "#define A 1\n", 12);
    digest(d, a, b);
    CHECK(same(d0, d));

    /* Moving bytes across the boundary between two files changes it. */
    write_file(a, "#define A 1\n#", 13);
    write_file(b, "define B 2\n", 11);
    digest(d, a, b);
    CHECK(!same(d0, d));
    write_file(a, "#define A 1\n", 12);
    write_file(b, "#define B 2\n", 12);

    /* The recipe, written out: see docs/KEY.md. */
    progcache__sha256 *h = progcache__sha256_new();
    CHECK(h != NULL);
    put_str(h, "digest_files", "1");
    put_str(h, "file_count", "2");
    put_str(h, "path", a);
    put_str(h, "bytes", "#define A 1\n");
    put_str(h, "path", b);
    put_str(h, "bytes", "#define B 2\n");
    CHECK_OK(progcache__sha256_final(h, d));
    CHECK(same(d0, d));

    /* Files larger than one read chunk; the last byte still counts. */
    size_t big_len = 200 * 1000 + 7;
    char *bytes = malloc(big_len);
    CHECK(bytes != NULL);
    for (size_t i = 0; i < big_len; i++)
        bytes[i] = (char)(i * 7);
    write_file(big, bytes, big_len);
    digest(d0, big, NULL);
    bytes[big_len - 1] ^= 1;
    write_file(big, bytes, big_len);
    digest(d, big, NULL);
    CHECK(!same(d0, d));
    free(bytes);

    /* Empty list: a fixed digest. */
    CHECK_OK(progcache_digest_files(d0, NULL, 0));
    CHECK_OK(progcache_digest_files(d, NULL, 0));
    CHECK(same(d0, d));

    /* Failures name the file. */
    const char *bad[] = {a, missing};
    CHECK_RC(PROGCACHE_EIO, progcache_digest_files(d, bad, 2));
    CHECK(strstr(progcache_error_last(), missing) != NULL);
    bad[1] = dir; /* a directory is not a header */
    CHECK_RC(PROGCACHE_EIO, progcache_digest_files(d, bad, 2));
    CHECK(strstr(progcache_error_last(), dir) != NULL);
    /* A FIFO nobody writes to is refused, not waited on. */
    char fifo[4200];
    snprintf(fifo, sizeof fifo, "%s/fifo.h", dir);
    CHECK(mkfifo(fifo, 0600) == 0);
    bad[1] = fifo;
    CHECK_RC(PROGCACHE_EIO, progcache_digest_files(d, bad, 2));
    CHECK(strstr(progcache_error_last(), "not a regular file") != NULL);
    bad[1] = NULL;
    CHECK_RC(PROGCACHE_EINVAL, progcache_digest_files(d, bad, 2));
    bad[1] = "";
    CHECK_RC(PROGCACHE_EINVAL, progcache_digest_files(d, bad, 2));
    CHECK_RC(PROGCACHE_EINVAL, progcache_digest_files(d, NULL, 1));
    CHECK_RC(PROGCACHE_EINVAL, progcache_digest_files(NULL, bad, 1));

    /* An unreadable file (when not running as root, which reads anyway). */
    if (geteuid() != 0) {
        CHECK(chmod(a, 0) == 0);
        bad[1] = a;
        CHECK_RC(PROGCACHE_EIO, progcache_digest_files(d, bad, 1));
        CHECK(strstr(progcache_error_last(), a) != NULL);
        CHECK(chmod(a, 0600) == 0);
    }
    test_rmdtemp(dir);
}

/* The key or digest call(got, ctx) with the Nth allocation failing, for
 * N = 1..8: each either gives want or fails with ENOMEM (and a message
 * saying so when message is set); both happen. */
static void fail_allocations(int (*call)(unsigned char *got, void *ctx), void *ctx,
                             const unsigned char *want, int message)
{
    unsigned char got[PROGCACHE_KEY_SIZE];
    int failures = 0, successes = 0;
    for (long n = 1; n <= 8; n++) {
        progcache__alloc_fail_after(n);
        int rc = call(got, ctx);
        progcache__alloc_fail_after(0);
        if (rc == PROGCACHE_OK) {
            CHECK(same(want, got));
            successes++;
        } else {
            CHECK(rc == PROGCACHE_ENOMEM);
            CHECK(!message || strstr(progcache_error_last(), "out of memory") != NULL);
            failures++;
        }
    }
    CHECK(failures > 0 && successes > 0);
}

static int key_call(unsigned char *got, void *ctx)
{
    return progcache_key_nvrtc(got, (const progcache_key_nvrtc_options *)ctx);
}

static int digest_call(unsigned char *got, void *ctx)
{
    const char *paths[] = {(const char *)ctx};
    return progcache_digest_files(got, paths, 1);
}

/* Allocation failure: ENOMEM with a message, never a crash or a wrong key. */
static void test_allocation_failure(void)
{
    unsigned char want[PROGCACHE_KEY_SIZE];
    const char *names[] = {"f<2>", "f<1>", "g"};
    progcache_key_nvrtc_options o = base();
    o.name_expressions = names;
    o.num_name_expressions = 3;
    key_of(want, &o);
    fail_allocations(key_call, &o, want, 1);

    char *dir = test_mkdtemp("key-alloc");
    char path[4200];
    snprintf(path, sizeof path, "%s/h.h", dir);
    write_file(path, "int x;\n", 7);
    digest(want, path, NULL);
    fail_allocations(digest_call, path, want, 0);
    test_rmdtemp(dir);
}

int main(void)
{
    test_targets();
    test_options_init();
    test_invalid_arguments();
    test_what_changes_the_key();
    test_name_expressions();
    test_nvrtc_version();
    test_hex();
    test_digest_files();
    test_allocation_failure();
    printf("test_key_nvrtc: ok\n");
    return 0;
}

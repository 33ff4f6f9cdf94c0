/* Headers in the key (docs/KEY.md, "Headers in memory", "Headers on
 * disk"): the headers digest recipe written out by hand; headers in memory
 * change the key by name and content, not by order; progcache_key_nvrtc
 * refuses includes it cannot see; progcache_key_nvrtc_files covers quoted
 * includes from the working directory, -I, absolute paths, pre-includes,
 * nested includes and __has_include probes (an edit of each gives another
 * key), refuses computed and missing includes and FIFOs naming them, and
 * gives cuda.core's key, byte for byte, to programs that read nothing. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "check.h"
#include "key_fixture.h"

static progcache_key_nvrtc_options opts(const char *source)
{
    return fixture_key_options(source);
}

/* The same with these NVRTC options instead (n of them). */
static progcache_key_nvrtc_options opts_with(const char *source, const char *const *options,
                                             size_t n)
{
    progcache_key_nvrtc_options o = fixture_key_options(source);
    o.options = options;
    o.num_options = n;
    return o;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    CHECK(fputs(text, f) >= 0);
    CHECK(fclose(f) == 0);
}

static void key_files(unsigned char out[32], const progcache_key_nvrtc_options *o)
{
    CHECK_OK(progcache_key_nvrtc_files(out, o));
}

static int same(const unsigned char *a, const unsigned char *b) { return !memcmp(a, b, 32); }

/* ---- the recipe, by hand ---------------------------------------------------- */

/* An independent writing of the field framing: label, 8-byte big-endian
 * length, payload. */
static void frame(EVP_MD_CTX *h, const char *label, const void *data, size_t len)
{
    unsigned char be[8];
    for (int i = 0; i < 8; i++)
        be[i] = (unsigned char)((unsigned long long)len >> (56 - 8 * i));
    EVP_DigestUpdate(h, label, strlen(label));
    EVP_DigestUpdate(h, be, 8);
    EVP_DigestUpdate(h, data, len);
}

static void frame_str(EVP_MD_CTX *h, const char *label, const char *s)
{
    frame(h, label, s, strlen(s));
}

static void test_recipe_by_hand(void)
{
    /* Two headers, given out of name order; the recipe sorts them. */
    progcache_header hs[] = {{"tile.h", "constexpr int T = 16;\n", 0},
                             {"act.h", "#pragma once\n", 5}};
    progcache_key_nvrtc_options o = opts("#include \"tile.h\"\n#include \"act.h\"\n");
    o.headers = hs;
    o.num_headers = 2;
    unsigned char with_headers[32], want[32], digest[32];
    CHECK_OK(progcache_key_nvrtc(with_headers, &o));

    EVP_MD_CTX *h = EVP_MD_CTX_new();
    EVP_DigestInit_ex(h, EVP_sha256(), NULL);
    frame_str(h, "headers", "1");
    frame_str(h, "memory_count", "2");
    frame_str(h, "memory_name", "act.h");
    frame(h, "memory_bytes", "#prag", 5); /* length 5: the first five bytes */
    frame_str(h, "memory_name", "tile.h");
    frame_str(h, "memory_bytes", "constexpr int T = 16;\n");
    frame_str(h, "file_count", "0");
    frame(h, "toolkit", "", 0);
    unsigned int n = 32;
    EVP_DigestFinal_ex(h, digest, &n);
    EVP_MD_CTX_free(h);

    progcache_key_nvrtc_options plain = o;
    plain.headers = NULL;
    plain.num_headers = 0;
    plain.extra_digest = digest;
    plain.extra_digest_len = sizeof digest;
    CHECK_OK(progcache_key_nvrtc(want, &plain));
    CHECK(same(with_headers, want));

    /* With the caller's digest too: it is the recipe's last field. */
    static const unsigned char mine[3] = {1, 2, 3};
    o.extra_digest = mine;
    o.extra_digest_len = 3;
    CHECK_OK(progcache_key_nvrtc(with_headers, &o));
    h = EVP_MD_CTX_new();
    EVP_DigestInit_ex(h, EVP_sha256(), NULL);
    frame_str(h, "headers", "1");
    frame_str(h, "memory_count", "2");
    frame_str(h, "memory_name", "act.h");
    frame(h, "memory_bytes", "#prag", 5);
    frame_str(h, "memory_name", "tile.h");
    frame_str(h, "memory_bytes", "constexpr int T = 16;\n");
    frame_str(h, "file_count", "0");
    frame(h, "toolkit", "", 0);
    frame(h, "extra_digest", mine, 3);
    EVP_DigestFinal_ex(h, digest, &n);
    EVP_MD_CTX_free(h);
    CHECK_OK(progcache_key_nvrtc(want, &plain));
    CHECK(same(with_headers, want));
    /* ... and the files key takes the caller's digest as the override. */
    unsigned char files[32];
    key_files(files, &o);
    CHECK(same(files, with_headers));
}

/* ---- headers in memory ----------------------------------------------------------- */

static void test_memory_headers(void)
{
    progcache_header a[] = {{"h.h", "__device__ int x = 1;\n", 0}, {"g.h", "// g\n", 0}};
    progcache_key_nvrtc_options o =
        opts("#include \"h.h\"\n#include <g.h>\n__global__ void k() {}\n");
    unsigned char k1[32], k2[32], k3[32], plain[32];
    /* Without them, the includes read files: refused, naming them. */
    CHECK_RC(PROGCACHE_EUNSAFEKEY, progcache_key_nvrtc(k1, &o));
    CHECK(strstr(progcache_error_last(), "default_program:1: #include \"h.h\""));
    o.headers = a;
    o.num_headers = 2;
    CHECK_OK(progcache_key_nvrtc(k1, &o));
    /* One derivation: the files key of a program that reads no file. */
    key_files(k2, &o);
    CHECK(same(k1, k2));
    /* Order does not matter (NVRTC refuses two of one name). */
    progcache_header b[] = {a[1], a[0]};
    o.headers = b;
    CHECK_OK(progcache_key_nvrtc(k2, &o));
    CHECK(same(k1, k2));
    /* Content and name do. */
    progcache_header c[] = {{"h.h", "__device__ int x = 2;\n", 0}, a[1]};
    o.headers = c;
    CHECK_OK(progcache_key_nvrtc(k3, &o));
    CHECK(!same(k1, k3));
    progcache_header d[] = {a[0], {"g2.h", "// g\n", 0}};
    o.headers = d;
    CHECK_RC(PROGCACHE_EUNSAFEKEY, progcache_key_nvrtc(k3, &o)); /* <g.h> is now a file */
    o.source = "#include \"h.h\"\n";
    CHECK_OK(progcache_key_nvrtc(k3, &o));
    CHECK(!same(k1, k3));
    /* A header in memory that includes a file is refused too, named. */
    progcache_header e[] = {{"h.h", "#include \"inner.h\"\n", 0}};
    o.headers = e;
    o.num_headers = 1;
    CHECK_RC(PROGCACHE_EUNSAFEKEY, progcache_key_nvrtc(k3, &o));
    CHECK(strstr(progcache_error_last(), "header \"h.h\" (in memory):1: #include \"inner.h\""));
    /* Bad headers. */
    progcache_header twice[] = {a[0], a[0]};
    o.headers = twice;
    o.num_headers = 2;
    CHECK_RC(PROGCACHE_EINVAL, progcache_key_nvrtc(k3, &o));
    CHECK(strstr(progcache_error_last(), "both named \"h.h\""));
    progcache_header unnamed[] = {{NULL, "x", 0}};
    o.headers = unnamed;
    o.num_headers = 1;
    CHECK_RC(PROGCACHE_EINVAL, progcache_key_nvrtc(k3, &o));
    o.headers = NULL;
    CHECK_RC(PROGCACHE_EINVAL, progcache_key_nvrtc(k3, &o));
    /* No headers, no include: cuda.core's key, whatever the function. */
    o = opts("extern \"C\" __global__ void k() {}\n");
    CHECK_OK(progcache_key_nvrtc(plain, &o));
    key_files(k1, &o);
    CHECK(same(plain, k1));
    /* A version-1 options struct (no headers fields) still works. */
    struct {
        progcache_key_nvrtc_options o;
        char guard[64];
    } old;
    memset(&old, 0x5a, sizeof old);
    memcpy(&old.o, &o, offsetof(progcache_key_nvrtc_options, headers));
    old.o.version = 1;
    CHECK_OK(progcache_key_nvrtc(k2, &old.o));
    CHECK(same(plain, k2));
}

/* ---- headers on disk ----------------------------------------------------------------- */

/* Key, edit path, key again: must differ; then restore. */
static void edit_changes_key(const progcache_key_nvrtc_options *o, const char *path,
                             const char *before, const char *after)
{
    unsigned char k1[32], k2[32], k3[32];
    write_file(path, before);
    key_files(k1, o);
    write_file(path, after);
    key_files(k2, o);
    CHECK(!same(k1, k2));
    write_file(path, before);
    key_files(k3, o);
    CHECK(same(k1, k3));
}

static void test_disk(const char *dir)
{
    char inc[4096], abs_h[4096], src[8192];
    snprintf(inc, sizeof inc, "%s/inc", dir);
    CHECK(mkdir(inc, 0755) == 0);
    CHECK(chdir(dir) == 0);
    unsigned char k1[32], k2[32];

    /* Quoted, from the working directory (the program name has no
     * directory part). */
    progcache_key_nvrtc_options o = opts("#include \"cwd.h\"\n__global__ void k() {}\n");
    edit_changes_key(&o, "cwd.h", "// 1\n", "// 2\n");
    /* progcache_key_nvrtc cannot see it. */
    CHECK_RC(PROGCACHE_EUNSAFEKEY, progcache_key_nvrtc(k1, &o));

    /* -I, in each spelling, and nested includes from there. */
    const char *spellings[][2] = {{"-Iinc", NULL}, {"-I", "inc"}, {"--include-path=inc", NULL},
                                  {"--include-path", "inc"}};
    for (size_t i = 0; i < 4; i++) {
        const char *options[] = {"-arch=sm_90", spellings[i][0], spellings[i][1]};
        o = opts("#include <outer.h>\n");
        o.options = options;
        o.num_options = spellings[i][1] ? 3 : 2;
        write_file("inc/inner.h", "// a\n");
        edit_changes_key(&o, "inc/outer.h", "#include \"inner.h\"\n", "#include \"inner.h\"\n//\n");
        edit_changes_key(&o, "inc/inner.h", "// a\n", "// b\n");
    }

    /* Absolute. */
    snprintf(abs_h, sizeof abs_h, "%s/abs.h", dir);
    snprintf(src, sizeof src, "#include \"%s\"\n", abs_h);
    o = opts(src);
    edit_changes_key(&o, abs_h, "// a\n", "// b\n");

    /* Pre-included, from the working directory and from -I. */
    const char *pre[] = {"-arch=sm_90", "--pre-include=pre.h"};
    o = opts_with("__global__ void k() {}\n", pre, 2);
    edit_changes_key(&o, "pre.h", "// a\n", "// b\n");
    const char *pre_i[] = {"-arch=sm_90", "-include", "pi.h", "-Iinc"};
    o.options = pre_i;
    o.num_options = 4;
    edit_changes_key(&o, "inc/pi.h", "// a\n", "// b\n");

    /* Renaming the path the include names changes the key (the path is
     * in the recipe), even with the same bytes. */
    write_file("inc/inner.h", "// same\n");
    write_file("inner.h", "// same\n");
    const char *iopt[] = {"-arch=sm_90", "-Iinc"};
    o = opts_with("#include \"inner.h\"\n", iopt, 2);
    key_files(k1, &o); /* ./inner.h, found first */
    CHECK(unlink("inner.h") == 0);
    key_files(k2, &o); /* inc/inner.h */
    CHECK(!same(k1, k2));

    /* A file appearing earlier on the search path is another key: what
     * NVRTC reads changed. */
    o = opts("#include <late.h>\n");
    const char *two[] = {"-arch=sm_90", "-Iinc", "-I."};
    o.options = two;
    o.num_options = 3;
    write_file("late.h", "// in .\n");
    key_files(k1, &o);
    write_file("inc/late.h", "// in .\n");
    key_files(k2, &o);
    CHECK(!same(k1, k2));

    /* __has_include: the file's appearance changes the key. */
    o = opts("#if __has_include(\"maybe.h\")\n#include \"maybe.h\"\n#endif\n");
    unlink("maybe.h");
    key_files(k1, &o);
    write_file("maybe.h", "// here\n");
    key_files(k2, &o);
    CHECK(!same(k1, k2));

    /* Refusals name the include and where it is. */
    o = opts("#define H \"cwd.h\"\n#include H\n");
    CHECK_RC(PROGCACHE_EUNSAFEKEY, progcache_key_nvrtc_files(k1, &o));
    CHECK(strstr(progcache_error_last(), "default_program:2: #include H"));
    CHECK(strstr(progcache_error_last(), "computed include"));
    o = opts("#include \"cwd.h\"\n");
    write_file("cwd.h", "#include <nowhere.h>\n");
    CHECK_RC(PROGCACHE_EUNSAFEKEY, progcache_key_nvrtc_files(k1, &o));
    CHECK(strstr(progcache_error_last(), "cwd.h:1: #include <nowhere.h>"));
    /* ... unless the caller's digest covers them (the override). */
    static const unsigned char digest[4] = {9, 9, 9, 9};
    o.extra_digest = digest;
    o.extra_digest_len = 4;
    CHECK_OK(progcache_key_nvrtc_files(k1, &o));
    CHECK_OK(progcache_key_nvrtc(k2, &o));
    CHECK(same(k1, k2));
    /* A FIFO where a header is: refused, not waited on. */
    CHECK(mkfifo("fifo.h", 0600) == 0);
    o = opts("#include \"fifo.h\"\n");
    CHECK_RC(PROGCACHE_EUNSAFEKEY, progcache_key_nvrtc_files(k1, &o));
    CHECK(strstr(progcache_error_last(), "not a regular file"));
    /* Precompiled headers still need the caller's digest. */
    const char *pch[] = {"-arch=sm_90", "--use-pch=x.pch"};
    o = opts_with("__global__ void k() {}\n", pch, 2);
    CHECK_RC(PROGCACHE_EUNSAFEKEY, progcache_key_nvrtc_files(k1, &o));
    CHECK(strstr(progcache_error_last(), "--use-pch=x.pch"));

    /* An include path and no include: not cuda.core's plain key (which
     * cuda.core refuses to make), but the headers digest of nothing. */
    const char *only_i[] = {"-arch=sm_90", "-Iinc"};
    o = opts_with("__global__ void k() {}\n", only_i, 2);
    key_files(k1, &o);
    o.options = fixture_key_arch;
    o.num_options = 1;
    key_files(k2, &o);
    CHECK(!same(k1, k2));
    CHECK_RC(PROGCACHE_EUNSAFEKEY, progcache_key_nvrtc(k2, &(progcache_key_nvrtc_options){
                                                               .version = 2,
                                                               .source = "x",
                                                               .options = only_i,
                                                               .num_options = 2}));
}

/* NVRTC's bundled headers (--use-bundled-headers=<dir>, NVRTC 13.3+):
 * keyed as cuda.core keys them, by the option string (and the NVRTC
 * version), never read, whether NVRTC has installed them yet or not; the
 * program's own headers are still covered; an include path that could
 * shadow them is refused. Run in a scratch directory. */
static void test_bundled(void)
{
    unsigned char k1[32], k2[32], k3[32];
    const char *src = "#include <cuda/std/cstdint>\n#include \"mine.h\"\n"
                      "__global__ void k(cuda::std::int32_t *a) { a[0] = MINE; }\n";
    const char *bundled[] = {"-arch=sm_90", "--use-bundled-headers=bh"};
    write_file("mine.h", "#define MINE 1\n");
    progcache_key_nvrtc_options o = opts_with(src, bundled, 2);
    key_files(k1, &o); /* bh/ is not there yet: NVRTC installs it */
    CHECK(mkdir("bh", 0700) == 0 && mkdir("bh/cuda", 0700) == 0 &&
          mkdir("bh/cuda/std", 0700) == 0);
    write_file("bh/cuda/std/cstdint", "#include <nothing/resolvable>\n");
    key_files(k2, &o); /* installed: not read, the same key */
    CHECK(same(k1, k2));
    write_file("bh/cuda/std/cstdint", "// another NVRTC's\n");
    key_files(k2, &o);
    CHECK(same(k1, k2));
    write_file("mine.h", "#define MINE 2\n"); /* the program's own header is read */
    key_files(k2, &o);
    CHECK(!same(k1, k2));
    const char *elsewhere[] = {"-arch=sm_90", "--use-bundled-headers", "other"};
    o = opts_with(src, elsewhere, 3);
    key_files(k3, &o); /* the option (its directory) is in the key, as in cuda.core */
    CHECK(!same(k2, k3));
    /* An include path searched first that holds "cuda": refused. */
    CHECK(mkdir("shadow", 0700) == 0 && mkdir("shadow/cuda", 0700) == 0);
    const char *shadowed[] = {"-arch=sm_90", "-Ishadow", "--use-bundled-headers=bh"};
    o = opts_with(src, shadowed, 3);
    CHECK_RC(PROGCACHE_EUNSAFEKEY, progcache_key_nvrtc_files(k3, &o));
    CHECK(strstr(progcache_error_last(), "bundled headers (bh)"));
    CHECK(strstr(progcache_error_last(), "\"cuda\""));
    const char *empty[] = {"-arch=sm_90", "--use-bundled-headers="};
    o = opts_with(src, empty, 2);
    CHECK_RC(PROGCACHE_EUNSAFEKEY, progcache_key_nvrtc_files(k3, &o));
}

int main(void)
{
    test_recipe_by_hand();
    test_memory_headers();
    char *dir = test_mkdtemp("headers-key");
    char cwd[4096];
    CHECK(getcwd(cwd, sizeof cwd) != NULL);
    test_disk(dir);
    test_bundled();
    CHECK(chdir(cwd) == 0);
    test_rmdtemp(dir);
    printf("headers in the key: ok\n");
    return 0;
}

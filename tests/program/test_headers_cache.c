/* Headers through compile-or-load (docs/KEY.md, "The manifest";
 * docs/RELIABILITY.md, "No stale artifact"), without a GPU:
 *  - headers in memory are compiled and keyed: content changes the key;
 *  - headers on disk (quoted from the working directory, -I, absolute,
 *    pre-include): each edit is a MISS under another key, never the old
 *    artifact; the key is progcache_key_nvrtc_files's; a manifest entry
 *    is stored, listed as a manifest and accepted by verify;
 *  - the manifest: encoded and decoded (every cut refused), and checked:
 *    VALID when nothing changed (stat only), REFRESHED after a touch,
 *    STALE after an edit or a file appearing in a watched directory;
 *  - a header edited while the program compiles keeps it out of the
 *    cache. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "program/program_key.h"
#include "cuda_fixtures.h"
#include "headers/header_manifest.h"
#include "headers/headers_digest.h"
#include "headers/include_resolve.h"
#include "progcache/admin.h"

static const char *const arch[] = {"-arch=sm_90"};

static progcache_program program(const char *source, const char *const *options, size_t n)
{
    progcache_program p = PROGCACHE_PROGRAM_INIT;
    p.nvrtc.source = source;
    p.nvrtc.options = options ? options : arch;
    p.nvrtc.num_options = options ? n : 1;
    p.flags = PROGCACHE_PROGRAM_NO_LOAD;
    return p;
}

static void write_text(const char *path, const char *text)
{
    fixture_write_file(path, text, strlen(text));
}

/* compile_or_load; returns the status, copies the key. */
static progcache_status run(progcache *cache, const progcache_program *p, unsigned char key[32])
{
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    CHECK_OK(progcache_compile_or_load(&r, cache, p));
    progcache_status s = r.status;
    memcpy(key, r.key, 32);
    unsigned char files[32];
    CHECK_OK(progcache_key_nvrtc_files(files, &p->nvrtc));
    CHECK(!memcmp(files, key, 32)); /* one derivation, with or without the manifest */
    progcache_program_result_release(&r);
    return s;
}

/* An edit of path makes a MISS under another key; the old text comes
 * back as a HIT under the old key. */
static void edit_misses(progcache *cache, const progcache_program *p, const char *path,
                        const char *a, const char *b)
{
    unsigned char k1[32], k2[32], k3[32];
    write_text(path, a);
    run(cache, p, k1);
    CHECK(run(cache, p, k2) == PROGCACHE_STATUS_HIT && !memcmp(k1, k2, 32));
    write_text(path, b);
    CHECK(run(cache, p, k2) == PROGCACHE_STATUS_MISS && memcmp(k1, k2, 32));
    CHECK(run(cache, p, k3) == PROGCACHE_STATUS_HIT && !memcmp(k2, k3, 32));
    write_text(path, a);
    CHECK(run(cache, p, k3) == PROGCACHE_STATUS_HIT && !memcmp(k1, k3, 32));
}

static void test_memory_headers(progcache *cache)
{
    progcache_header h = {"tile.h", "constexpr int TILE = 16;\n", 0};
    progcache_program p = program("#include \"tile.h\"\n"
                                  "extern \"C\" __global__ void k(int *a) { a[0] = TILE; }\n",
                                  NULL, 0);
    p.nvrtc.headers = &h;
    p.nvrtc.num_headers = 1;
    unsigned char k1[32], k2[32];
    CHECK(run(cache, &p, k1) == PROGCACHE_STATUS_MISS);
    CHECK(run(cache, &p, k2) == PROGCACHE_STATUS_HIT && !memcmp(k1, k2, 32));
    h.content = "constexpr int TILE = 32;\n";
    CHECK(run(cache, &p, k2) == PROGCACHE_STATUS_MISS && memcmp(k1, k2, 32));
    /* NVRTC sees the header: a broken one fails the compile. */
    h.content = "this is not C++\n";
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    CHECK_RC(PROGCACHE_ECOMPILE, progcache_compile_or_load(&r, cache, &p));
    CHECK(strstr(progcache_error_last(), "tile.h"));
    progcache_program_result_release(&r);
}

static void test_disk_headers(progcache *cache, const char *dir)
{
    CHECK(mkdir("inc", 0755) == 0);
    static const char body[] = "extern \"C\" __global__ void k(int *a) { a[0] = V; }\n";
    char src[8192];

    snprintf(src, sizeof src, "#include \"cwd.h\"\n%s", body);
    progcache_program p = program(src, NULL, 0);
    edit_misses(cache, &p, "cwd.h", "#define V 1\n", "#define V 2\n");

    const char *with_i[] = {"-arch=sm_90", "-Iinc"};
    snprintf(src, sizeof src, "#include <i.h>\n%s", body);
    p = program(src, with_i, 2);
    edit_misses(cache, &p, "inc/i.h", "#define V 3\n", "#define V 4\n");

    char abs_h[4096];
    snprintf(abs_h, sizeof abs_h, "%s/abs.h", dir);
    snprintf(src, sizeof src, "#include \"%s\"\n%s", abs_h, body);
    p = program(src, NULL, 0);
    edit_misses(cache, &p, abs_h, "#define V 5\n", "#define V 6\n");

    const char *pre[] = {"-arch=sm_90", "--pre-include=pre.h"};
    p = program(body, pre, 2);
    edit_misses(cache, &p, "pre.h", "#define V 7\n", "#define V 8\n");

    /* Nested, with a manifest: still a MISS on an edit. */
    snprintf(src, sizeof src, "#include \"outer.h\"\n%s", body);
    p = program(src, with_i, 2);
    write_text("inc/outer.h", "#include \"inner.h\"\n");
    write_text("inc/inner.h", "#define V 9\n");
    unsigned char k1[32], k2[32];
    run(cache, &p, k1);
    CHECK(run(cache, &p, k2) == PROGCACHE_STATUS_HIT);
    write_text("inc/inner.h", "#define V 10\n");
    CHECK(run(cache, &p, k2) == PROGCACHE_STATUS_MISS && memcmp(k1, k2, 32));

    /* Refused, naming the include and the file. */
    p = program("#define H <cwd.h>\n#include H\n", NULL, 0);
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    CHECK_RC(PROGCACHE_EUNSAFEKEY, progcache_compile_or_load(&r, cache, &p));
    CHECK(strstr(progcache_error_last(), "default_program:2: #include H"));
    progcache_program_result_release(&r);
}

/* Every entry is an artifact or a valid manifest, and verify agrees. */
static int manifests;
static int count_kinds(void *ctx, const progcache_entry *e)
{
    (void)ctx;
    CHECK(e->artifact && e->artifact->valid);
    if (e->artifact->kind == PROGCACHE_KIND_MANIFEST)
        manifests++;
    else
        CHECK(e->artifact->kind == PROGCACHE_KIND_CUBIN);
    return 0;
}

static void test_listing(const char *dir)
{
    progcache_file *file = NULL;
    CHECK_OK(progcache_file_open(&file, dir, NULL));
    CHECK_OK(progcache_file_foreach(file, PROGCACHE_ENTRIES_INSPECT, count_kinds, NULL));
    CHECK(manifests >= 5);
    progcache_verify_result v = PROGCACHE_VERIFY_RESULT_INIT;
    CHECK_OK(progcache_file_verify(&v, file, NULL));
    CHECK(v.bad == 0 && v.checked > (uint64_t)manifests);
    progcache_file_close(file);
}

static void test_manifest(void)
{
    write_text("m1.h", "#include \"m2.h\"\n");
    write_text("m2.h", "// m2\n");
    /* Old enough that their stats vouch for them: the "too new" window
     * counts the change time too, which only the passing of time moves. */
    sleep(3);
    progcache_key_nvrtc_options o = PROGCACHE_KEY_NVRTC_OPTIONS_INIT;
    o.source = "#include \"m1.h\"\n#if __has_include(\"later.h\")\n#include \"later.h\"\n#endif\n";
    o.options = arch;
    o.num_options = 1;
    progcache__header_scan scan = PROGCACHE__HEADER_SCAN_INIT, back = PROGCACHE__HEADER_SCAN_INIT;
    CHECK_OK(progcache__header_scan_run(&scan, &o));
    CHECK(scan.num_files == 2 && scan.num_dirs == 1 && !scan.files[0].too_new);
    progcache_buf bytes = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache__manifest_encode(&bytes, &scan));
    CHECK_OK(progcache__manifest_decode(&back, bytes.data, bytes.size));
    CHECK(back.num_files == 2 && !strcmp(back.files[1].path, "m2.h") &&
          !memcmp(back.files[1].sha256, scan.files[1].sha256, 32));
    for (size_t cut = 0; cut < bytes.size; cut++)
        CHECK_RC(PROGCACHE_ECORRUPT, progcache__manifest_decode(&back, bytes.data, cut));
    for (size_t i = 0; i < bytes.size; i++) {
        /* Any one byte changed: refused, or read without harm. */
        bytes.data[i] ^= 0x40;
        (void)progcache__manifest_decode(&back, bytes.data, bytes.size);
        bytes.data[i] ^= 0x40;
    }
    CHECK_OK(progcache__manifest_decode(&back, bytes.data, bytes.size));

    progcache__manifest_state state;
    CHECK_OK(progcache__manifest_check(&back, &state));
    CHECK(state == PROGCACHE__MANIFEST_VALID);
    /* Touched, same bytes: read again, still good, rewrite it. */
    write_text("m2.h", "// m2\n");
    CHECK_OK(progcache__manifest_check(&back, &state));
    CHECK(state == PROGCACHE__MANIFEST_REFRESHED);
    /* Other bytes. */
    CHECK_OK(progcache__manifest_decode(&back, bytes.data, bytes.size));
    write_text("m2.h", "// m2, edited\n");
    CHECK_OK(progcache__manifest_check(&back, &state));
    CHECK(state == PROGCACHE__MANIFEST_STALE);
    write_text("m2.h", "// m2\n");
    sleep(3);
    /* A file appearing where one was looked for. */
    CHECK_OK(progcache__header_scan_run(&scan, &o));
    CHECK_OK(progcache__manifest_encode(&bytes, &scan));
    CHECK_OK(progcache__manifest_decode(&back, bytes.data, bytes.size));
    CHECK_OK(progcache__manifest_check(&back, &state));
    CHECK(state == PROGCACHE__MANIFEST_VALID);
    write_text("later.h", "// later\n");
    CHECK_OK(progcache__manifest_check(&back, &state));
    CHECK(state == PROGCACHE__MANIFEST_STALE);

    /* Changed while "compiling": what the key saw is no longer there, so
     * the artifact is not stored under it. */
    progcache__program_key pk = PROGCACHE__PROGRAM_KEY_INIT;
    unsigned char key[32];
    CHECK_OK(progcache__program_key_derive(key, &pk, NULL, &o));
    CHECK(pk.reads && pk.scan.num_files == 3);
    CHECK_OK(progcache__program_key_unchanged(&pk));
    write_text("m2.h", "// m2 changed under the compile\n");
    CHECK_RC(PROGCACHE_EUNSAFEKEY, progcache__program_key_unchanged(&pk));
    CHECK(strstr(progcache_error_last(), "\"m2.h\" changed while"));
    progcache__program_key_free(&pk);
    progcache__header_scan_free(&scan);
    progcache__header_scan_free(&back);
    progcache_buf_free(&bytes);
}

int main(void)
{
    char *dir = test_mkdtemp("headers-cache");
    char cwd[4096], cache_dir[4200];
    CHECK(getcwd(cwd, sizeof cwd) != NULL);
    CHECK(chdir(dir) == 0);
    snprintf(cache_dir, sizeof cache_dir, "%s/cache", dir);
    progcache *cache = NULL;
    CHECK_OK(progcache_open(&cache, cache_dir, NULL));
    test_memory_headers(cache);
    test_disk_headers(cache, dir);
    progcache_close(cache);
    test_listing(cache_dir);
    test_manifest();
    CHECK(chdir(cwd) == 0);
    test_rmdtemp(dir);
    printf("headers through compile-or-load: ok\n");
    return 0;
}

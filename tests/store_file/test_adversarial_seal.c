/* An entry copied, linked or moved to another key's path (issue 12): a
 * miss, removed, and recompiled (the seal binds the entry's name). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "adversarial_fixture.h"
#include "cuda_fixtures.h"

/* ---- 4. the seal binds the entry's name --------------------------------- */

static void copy_with_seal(const char *from, const char *to)
{
    size_t n = 0;
    char *bytes = test_read_file(from, &n);
    unsigned char seal[128];
    ssize_t len = getxattr(from, FILE_SEAL_XATTR, seal, sizeof seal);
    CHECK(bytes && len > 0);
    FILE *f = fopen(to, "wb");
    CHECK(f && fwrite(bytes, 1, n, f) == n && fclose(f) == 0);
    CHECK(setxattr(to, FILE_SEAL_XATTR, seal, (size_t)len, 0) == 0);
    free(bytes);
}

static void test_seal_binds_key(void)
{
    char *dir = test_mkdtemp("adv-seal");
    if (!have_xattrs(dir)) {
        puts("test_adversarial: the seal: skipped (no user xattrs on this file system)");
        test_rmdtemp(dir);
        return;
    }
    progcache_store *s = open_store(dir);
    char a[4200], b[4200], c[4200];
    entry_of(a, sizeof a, dir, "key-a");
    entry_of(b, sizeof b, dir, "key-b");
    entry_of(c, sizeof c, dir, "key-c");
    const char *const how[] = {"copy", "hard link", "rename"};
    progcache_buf buf = PROGCACHE_BUF_INIT;
    for (int i = 0; i < 3; i++) {
        CHECK_OK(progcache_store_put(s, "key-a", 5, "value of a", 10));
        CHECK_OK(progcache_store_put(s, "key-b", 5, "value of b", 10)); /* makes b's shard */
        CHECK(unlink(b) == 0);
        if (i == 0)
            copy_with_seal(a, b);
        else if (i == 1)
            CHECK(link(a, b) == 0);
        else
            CHECK(rename(a, b) == 0);
        progcache_stats st = PROGCACHE_STATS_INIT;
        CHECK_OK(progcache_store_stats_get(&st, s));
        uint64_t before = st.corrupt_removed;
        log_text[0] = '\0';
        CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_get(&buf, s, "key-b", 5));
        CHECK_OK(progcache_store_stats_get(&st, s));
        if (st.corrupt_removed != before + 1 || exists(b)) {
            fprintf(stderr, "%s: not removed\n", how[i]);
            CHECK(0);
        }
        CHECK(strstr(log_text, "sealed for another entry") != NULL);
        if (i < 2) { /* the original is untouched and still a hit */
            CHECK_OK(progcache_store_get(&buf, s, "key-a", 5));
            CHECK(buf.size == 10 && !memcmp(buf.data, "value of a", 10));
        }
    }

    /* verify names it; --fix removes it. */
    CHECK_OK(progcache_store_put(s, "key-a", 5, "value of a", 10));
    copy_with_seal(a, b);
    progcache_verify_result res;
    seen v;
    verify(&res, &v, s, 0);
    CHECK(strstr(v.text, "sealed for another entry") != NULL);
    verify(&res, &v, s, PROGCACHE_VERIFY_FIX);
    CHECK(!exists(b)); /* (a went too: "value of a" is no artifact) */

    /* Seals that bind no name (an older progcache's, 32 or 33 bytes) or of
     * a format this version does not know: read as no seal, as cuda.core's
     * entries are (a plain value passes the structure check). */
    unsigned char seal[64];
    memset(seal, 0x5a, sizeof seal);
    const size_t lens[] = {32, 33, FILE_SEAL_SIZE, FILE_SEAL_SIZE + 1};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        CHECK_OK(progcache_store_put(s, "key-c", 5, "value of c", 10));
        seal[0] = 9; /* not format 2 */
        CHECK(setxattr(c, FILE_SEAL_XATTR, seal, lens[i], 0) == 0);
        CHECK_OK(progcache_store_get(&buf, s, "key-c", 5));
        CHECK(buf.size == 10 && !memcmp(buf.data, "value of c", 10));
    }
    /* Import seals with the entry's name too (progcache__file_put_rel). */
    char rel[FILE_REL_PATH_MAX];
    int shard;
    CHECK_OK(progcache__file_rel_path(rel, &shard, "key-c", 5));
    CHECK_OK(progcache__file_put_rel(progcache_store_as_file(s), rel, shard, "imported", 8, NULL));
    CHECK(getxattr(c, FILE_SEAL_XATTR, seal, sizeof seal) == FILE_SEAL_SIZE && seal[0] == 2);
    CHECK_OK(progcache_store_get(&buf, s, "key-c", 5));
    CHECK(unlink(b) == 0 || errno == ENOENT);
    copy_with_seal(c, b);
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_get(&buf, s, "key-b", 5));

    progcache_buf_free(&buf);
    progcache_store_free(s);
    test_rmdtemp(dir);
}

/* compile-or-load: another program's entry copied to this program's path
 * is a miss and is recompiled. */
static const char other_source[] =
    "extern \"C\" __global__ void scale(float *a, float s, int n)\n"
    "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] *= s + 1.0f; }\n";

static void test_seal_heals_compile(void)
{
    char *dir = test_mkdtemp("adv-sealc");
    if (!have_xattrs(dir)) {
        test_rmdtemp(dir);
        return;
    }
    progcache *cache;
    CHECK_OK(progcache_open(&cache, dir, NULL));
    progcache_program pa = fixture_program(PROGCACHE_PROGRAM_NO_LOAD);
    progcache_program pb = pa;
    pb.nvrtc.source = other_source;
    progcache_program_result ra = PROGCACHE_PROGRAM_RESULT_INIT, rb = PROGCACHE_PROGRAM_RESULT_INIT;
    size_t na, nb;
    unsigned char *art_a = fixture_compile_copy(&ra, cache, &pa, &na);
    unsigned char *art_b = fixture_compile_copy(&rb, cache, &pb, &nb);
    CHECK(na != nb || memcmp(art_a, art_b, na) != 0);
    char path_a[4096], path_b[4096];
    fixture_entry_path(path_a, sizeof path_a, dir, ra.key);
    fixture_entry_path(path_b, sizeof path_b, dir, rb.key);
    CHECK(unlink(path_b) == 0);
    copy_with_seal(path_a, path_b); /* a's CUBIN, sealed, at b's path */
    CHECK_OK(progcache_compile_or_load(&rb, cache, &pb));
    CHECK(rb.status == PROGCACHE_STATUS_MISS);
    CHECK(rb.artifact.size == nb && !memcmp(rb.artifact.data, art_b, nb));
    CHECK_OK(progcache_compile_or_load(&rb, cache, &pb)); /* healed: b's own entry */
    CHECK(rb.status == PROGCACHE_STATUS_HIT);
    CHECK(rb.artifact.size == nb && !memcmp(rb.artifact.data, art_b, nb));
    progcache_stats st = PROGCACHE_STATS_INIT;
    CHECK_OK(progcache_stats_get(&st, cache));
    CHECK(st.corrupt_removed == 1);
    free(art_a);
    free(art_b);
    progcache_program_result_release(&ra);
    progcache_program_result_release(&rb);
    test_cache_done(cache, dir);
}

ADVERSARIAL_MAIN("test_adversarial_seal", ADVERSARIAL_TEST(seal_binds_key),
                 ADVERSARIAL_TEST(seal_heals_compile))

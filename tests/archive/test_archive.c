/* Export and import (src/archive/archive.c): a byte-identical round trip,
 * the strict member-name rules, and hostile archives (traversal, links,
 * pax overrides, bad checksums, truncation) refused before anything is
 * written. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "archive/archive.h"
#include "tar_fixture.h"

static void fill(const char *dir, int n)
{
    progcache_store *fs;
    CHECK_OK(progcache_store_file_new(&fs, dir, NULL));
    for (int i = 0; i < n; i++) {
        char key[16], text[256];
        snprintf(key, sizeof key, "key-%d", i);
        /* Sizes around block boundaries: 511, 512, 513, ... */
        int len = snprintf(text, sizeof text, "//%d\n.version 8.0\n.target sm_90\n", i);
        CHECK_OK(progcache_store_put(fs, key, strlen(key), text, (size_t)len));
    }
    static unsigned char big[1025];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (unsigned char)(i * 7);
    for (size_t len = 511; len <= 513; len++) {
        char key[16];
        snprintf(key, sizeof key, "big-%zu", len);
        CHECK_OK(progcache_store_put(fs, key, strlen(key), big, len));
    }
    CHECK_OK(progcache_store_put(fs, "empty", 5, "", 0));
    progcache_store_free(fs);
}

typedef struct snapshot {
    char names[64][65];
    progcache_buf data[64];
    size_t count;
} snapshot;

static int snap_fn(void *ctx, const progcache_entry *e)
{
    snapshot *s = ctx;
    CHECK(s->count < 64);
    memcpy(s->names[s->count], e->name, 65);
    progcache_buf b = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache_buf_set(&b, e->data ? (const void *)e->data : "", (size_t)e->size));
    s->data[s->count++] = b;
    return 0;
}

static void take(snapshot *s, const char *dir)
{
    progcache_store *fs;
    progcache_file_options ro = PROGCACHE_FILE_OPTIONS_INIT;
    ro.flags = PROGCACHE_FILE_READONLY;
    memset(s, 0, sizeof *s);
    CHECK_OK(progcache_store_file_new(&fs, dir, &ro));
    CHECK_OK(progcache_file_foreach(progcache_store_as_file(fs), PROGCACHE_ENTRIES_READ, snap_fn, s));
    progcache_store_free(fs);
}

static void drop(snapshot *s)
{
    for (size_t i = 0; i < s->count; i++)
        progcache_buf_free(&s->data[i]);
}

static void test_round_trip(void)
{
    char *src = test_mkdtemp("arcsrc"), *dst = test_mkdtemp("arcdst");
    fill(src, 6);
    char archive[1024];
    snprintf(archive, sizeof archive, "%s/cache.tar", dst);
    progcache_store *fs;
    CHECK_OK(progcache_store_file_new(&fs, src, NULL));
    progcache_archive_result res = PROGCACHE_ARCHIVE_RESULT_INIT;
    CHECK_OK(progcache_file_export(&res, progcache_store_as_file(fs), archive, NULL));
    CHECK(res.entries == 10 && res.invalid == 4); /* the binary ones are no artifacts */
    progcache_store_free(fs);
    struct stat st;
    CHECK(stat(archive, &st) == 0 && st.st_size % 10240 == 0);

    char into[1024];
    snprintf(into, sizeof into, "%s/cache", dst);
    CHECK_OK(progcache_store_file_new(&fs, into, NULL));
    progcache_archive_result in = PROGCACHE_ARCHIVE_RESULT_INIT;
    CHECK_OK(progcache_file_import(&in, progcache_store_as_file(fs), archive, NULL));
    CHECK(in.entries == 10 && in.bytes == res.bytes);
    uint64_t count;
    CHECK_OK(progcache_store_count(&count, fs));
    CHECK(count == 10);
    progcache_store_free(fs);

    snapshot a, b;
    take(&a, src);
    take(&b, into);
    CHECK(a.count == 10 && b.count == 10);
    for (size_t i = 0; i < a.count; i++) {
        CHECK(!strcmp(a.names[i], b.names[i]));
        CHECK(a.data[i].size == b.data[i].size);
        CHECK(!memcmp(a.data[i].data, b.data[i].data, a.data[i].size));
    }
    drop(&a);
    drop(&b);

    /* The archive parses block by block as documented. */
    int fd = open(archive, O_RDONLY);
    CHECK(fd >= 0);
    unsigned char block[TAR_BLOCK];
    CHECK(read(fd, block, sizeof block) == TAR_BLOCK);
    close(fd);
    tar_header h;
    char why[256];
    CHECK(progcache__tar_parse(&h, block, why, sizeof why) == 1);
    CHECK(h.type == '0' && !strncmp(h.name, "entries/", 8) && strlen(h.name) == 73);

    test_rmtree(src);
    test_rmtree(dst);
    free(src);
    free(dst);
}

static void test_names(void)
{
    static const char hex62[] = "00112233445566778899aabbccddeeff00112233445566778899aabbccddee";
    char name[160], rel[80];
    int shard = -1;
    snprintf(name, sizeof name, "entries/ab/%s", hex62);
    CHECK(progcache__tar_name(name, rel, &shard) == TAR_NAME_ENTRY && shard == 0xab);
    CHECK(!strcmp(rel, name));
    snprintf(name, sizeof name, "./entries/0f/%s", hex62);
    CHECK(progcache__tar_name(name, rel, &shard) == TAR_NAME_ENTRY && shard == 0x0f);
    CHECK(!strncmp(rel, "entries/0f/", 11));
    static const char *dirs[] = {"entries", "entries/", "./entries/", "entries/ab", "entries/ab/"};
    for (size_t i = 0; i < 5; i++)
        CHECK(progcache__tar_name(dirs[i], rel, &shard) == TAR_NAME_DIR);
    static const char *bad[] = {"",
                                ".",
                                "./",
                                "tmp/x",
                                "progcache/stats",
                                "/entries/ab/x",
                                "entries/../x",
                                "entries/ab/../../etc",
                                "entries/AB/",
                                "entries/abc/",
                                "entriesX/ab/",
                                "entries//ab",
                                "../entries/ab/",
                                "entries/ab/x",
                                "entries/ab//",
                                "./../entries"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(progcache__tar_name(bad[i], rel, &shard) == TAR_NAME_BAD);
    snprintf(name, sizeof name, "entries/ab/%s/", hex62);
    CHECK(progcache__tar_name(name, rel, &shard) == TAR_NAME_BAD);
    snprintf(name, sizeof name, "entries/ab/%.61s", hex62);
    CHECK(progcache__tar_name(name, rel, &shard) == TAR_NAME_BAD);
    snprintf(name, sizeof name, "entries/ab/%sf", hex62);
    CHECK(progcache__tar_name(name, rel, &shard) == TAR_NAME_BAD);
    snprintf(name, sizeof name, "entries/ab/%.61sG", hex62);
    CHECK(progcache__tar_name(name, rel, &shard) == TAR_NAME_BAD);
}

/* ---- building hostile archives ---------------------------------------------- */

typedef struct builder {
    unsigned char *data;
    size_t len;
} builder;

static void append(builder *b, const void *p, size_t n)
{
    b->data = realloc(b->data, b->len + n);
    CHECK(b->data != NULL);
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

/* A member of any type and name (up to 99 bytes) with data. */
static void member(builder *b, const char *name, char type, const void *data, size_t len)
{
    unsigned char block[TAR_BLOCK];
    CHECK(progcache__tar_make(block, strlen(name) < 100 ? name : "x", len, 0) == 0);
    if (strlen(name) >= 100)
        memcpy(block, name, 100);
    block[156] = (unsigned char)type;
    if (type == '2' || type == '1')
        memcpy(block + 157, "../../../../etc/passwd", 22);
    tar_fix_checksum(block);
    append(b, block, sizeof block);
    append(b, data, len);
    static const unsigned char zeros[TAR_BLOCK];
    if (len % TAR_BLOCK)
        append(b, zeros, TAR_BLOCK - len % TAR_BLOCK);
}

static void end(builder *b)
{
    static const unsigned char zeros[2 * TAR_BLOCK];
    append(b, zeros, sizeof zeros);
}

static void write_all(const char *path, const builder *b)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0);
    CHECK(write(fd, b->data, b->len) == (ssize_t)b->len);
    close(fd);
}

/* b written to archive (and its memory freed), then imported into a file
 * store at cache, which is returned; the import must succeed. */
static progcache_store *import_built(builder *b, const char *archive, const char *cache,
                                     progcache_archive_result *res)
{
    write_all(archive, b);
    free(b->data);
    progcache_store *fs;
    CHECK_OK(progcache_store_file_new(&fs, cache, NULL));
    CHECK_OK(progcache_file_import(res, progcache_store_as_file(fs), archive, NULL));
    return fs;
}

static const char good_name[] =
    "entries/ab/00112233445566778899aabbccddeeff00112233445566778899aabbccddee";
static const char good_data[] = "//\n.version 8.0\n.target sm_90\n";

/* Each archive starts with a good member, then the bad one: refusing must
 * come before the good one is written. */
static void expect_refused(const char *work, builder *b, const char *why_fragment)
{
    char archive[1024], cache[1024], outside[1024];
    snprintf(archive, sizeof archive, "%s/hostile.tar", work);
    snprintf(cache, sizeof cache, "%s/cache", work);
    snprintf(outside, sizeof outside, "%s", work);
    write_all(archive, b);
    progcache_store *fs;
    CHECK_OK(progcache_store_file_new(&fs, cache, NULL));
    size_t before = test_count_names(outside, 0);
    progcache_archive_result res = PROGCACHE_ARCHIVE_RESULT_INIT;
    CHECK_RC(PROGCACHE_ECORRUPT, progcache_file_import(&res, progcache_store_as_file(fs), archive, NULL));
    if (!strstr(progcache_error_last(), why_fragment)) {
        fprintf(stderr, "message: %s\n(expected to mention \"%s\")\n", progcache_error_last(),
                why_fragment);
        CHECK(!"the refusal names the problem");
    }
    CHECK(strstr(progcache_error_last(), archive));
    CHECK(res.entries == 0);
    uint64_t count;
    CHECK_OK(progcache_store_count(&count, fs));
    CHECK(count == 0);
    progcache_store_free(fs);
    CHECK(test_count_names(outside, 0) == before);
    free(b->data);
    b->data = NULL;
    b->len = 0;
}

static void test_hostile(void)
{
    char *work = test_mkdtemp("archostile");
    builder b = {NULL, 0};
    char name[200];

    member(&b, good_name, '0', good_data, sizeof good_data - 1);
    member(&b, "entries/../../evil", '0', "x", 1);
    end(&b);
    expect_refused(work, &b, "entries/../../evil");

    member(&b, good_name, '0', good_data, sizeof good_data - 1);
    member(&b, "/etc/evil", '0', "x", 1);
    end(&b);
    expect_refused(work, &b, "not a cache entry");

    snprintf(name, sizeof name, "entries/ab/%062d", 1);
    member(&b, good_name, '0', good_data, sizeof good_data - 1);
    member(&b, name, '2', "", 0);
    end(&b);
    expect_refused(work, &b, "symbolic link");

    member(&b, good_name, '0', good_data, sizeof good_data - 1);
    member(&b, name, '1', "", 0);
    end(&b);
    expect_refused(work, &b, "hard link");

    member(&b, good_name, '0', good_data, sizeof good_data - 1);
    member(&b, name, '3', "", 0);
    end(&b);
    expect_refused(work, &b, "device");

    /* A directory with an entry's name, a file with a directory's name. */
    member(&b, name, '5', "", 0);
    end(&b);
    expect_refused(work, &b, "not a regular file");
    member(&b, "entries/ab/", '0', "x", 1);
    end(&b);
    expect_refused(work, &b, "not a regular file");

    /* A pax header renaming the next member out of the cache. */
    static const char pax[] = "23 path=../../evil.txt\n";
    member(&b, good_name, '0', good_data, sizeof good_data - 1);
    member(&b, "PaxHeaders/x", 'x', pax, sizeof pax - 1);
    member(&b, good_name, '0', "x", 1);
    end(&b);
    expect_refused(work, &b, "../../evil.txt");
    static const char bad_pax[] = "99 path=x\n";
    member(&b, "PaxHeaders/x", 'x', bad_pax, sizeof bad_pax - 1);
    member(&b, good_name, '0', "x", 1);
    end(&b);
    expect_refused(work, &b, "pax");

    /* GNU long names. */
    member(&b, "././@LongLink", 'L', "entries/ab/x", 12);
    member(&b, good_name, '0', "x", 1);
    end(&b);
    expect_refused(work, &b, "long-name");

    /* A bad checksum, a truncated member, no end, random bytes, empty. */
    member(&b, good_name, '0', good_data, sizeof good_data - 1);
    b.data[0] ^= 1;
    end(&b);
    expect_refused(work, &b, "checksum");
    member(&b, good_name, '0', good_data, sizeof good_data - 1);
    b.len -= 500;
    expect_refused(work, &b, "past the end");
    member(&b, good_name, '0', good_data, sizeof good_data - 1);
    expect_refused(work, &b, "cut short");
    unsigned char junk[3 * TAR_BLOCK];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (unsigned char)(i * 31 + 7);
    append(&b, junk, sizeof junk);
    expect_refused(work, &b, "not a tar");
    append(&b, "", 0);
    expect_refused(work, &b, "empty");

    /* A member too large to hold: refused without reading it. */
    unsigned char block[TAR_BLOCK];
    CHECK(progcache__tar_make(block, good_name, 0, 0) == 0);
    memcpy(block + 124, "77777777777", 11);
    tar_fix_checksum(block);
    append(&b, block, sizeof block);
    end(&b);
    expect_refused(work, &b, "past the end");

    /* An archive with nothing in it imports nothing, successfully. */
    end(&b);
    char archive[1024], cache[1024];
    snprintf(archive, sizeof archive, "%s/empty.tar", work);
    snprintf(cache, sizeof cache, "%s/cache", work);
    progcache_archive_result res = PROGCACHE_ARCHIVE_RESULT_INIT;
    progcache_store *fs = import_built(&b, archive, cache, &res);
    CHECK(res.entries == 0);
    /* Missing archive: an I/O error naming it. */
    snprintf(archive, sizeof archive, "%s/missing.tar", work);
    CHECK_RC(PROGCACHE_EIO, progcache_file_import(&res, progcache_store_as_file(fs), archive, NULL));
    CHECK(strstr(progcache_error_last(), "missing.tar"));
    progcache_store_free(fs);
    test_rmdtemp(work);
}

/* pax and GNU variants of good archives. */
static void test_variants(void)
{
    char *work = test_mkdtemp("arcvariants");
    builder b = {NULL, 0};
    static const char pax[] = "30 mtime=1700000000.123456789\n";
    char archive[1024], cache[1024];
    snprintf(archive, sizeof archive, "%s/v.tar", work);
    snprintf(cache, sizeof cache, "%s/cache", work);
    member(&b, "entries/", '5', "", 0);
    member(&b, "entries/ab/", '5', "", 0);
    member(&b, "PaxHeaders/g", 'g', pax, sizeof pax - 1);
    member(&b, "PaxHeaders/x", 'x', pax, sizeof pax - 1);
    member(&b, good_name, '0', good_data, sizeof good_data - 1);
    /* GNU magic ("ustar  \0") and a pax path naming an entry. */
    char pax_path[200];
    int n = snprintf(pax_path, sizeof pax_path, "xx path=./%s\n", good_name);
    char len_prefix[8];
    snprintf(len_prefix, sizeof len_prefix, "%d", n);
    memcpy(pax_path, len_prefix, 2);
    member(&b, "PaxHeaders/y", 'x', pax_path, (size_t)n);
    size_t at = b.len;
    member(&b, "ignored-by-pax", '0', "replaced", 8);
    memcpy(b.data + at + 257, "ustar  ", 8);
    tar_fix_checksum(b.data + at);
    end(&b);
    progcache_archive_result res = PROGCACHE_ARCHIVE_RESULT_INIT;
    progcache_store *fs = import_built(&b, archive, cache, &res);
    /* The pax path names the same entry again: one entry, the first valid
     * copy (test_duplicates). */
    CHECK(res.entries == 1 && res.invalid == 0);
    progcache_buf out = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache_file_read_entry(
        &out, progcache_store_as_file(fs), "ab00112233445566778899aabbccddeeff00112233445566778899aabbccddee"));
    CHECK(out.size == sizeof good_data - 1 && !memcmp(out.data, good_data, out.size));
    progcache_buf_free(&out);
    progcache_store_free(fs);
    test_rmdtemp(work);
}

/* ---- the same entry twice (issue 20) ------------------------------------------ */

static void count_warning(void *ctx, int level, const char *message)
{
    if (level == PROGCACHE_LOG_WARN && strstr(message, "repeat an entry"))
        ++*(int *)ctx;
}

/* An archive holding one entry as members a, then b: what is imported. */
static void import_twice(const char *work, const char *a, const char *b, const char *kept,
                         uint64_t invalid)
{
    builder t = {NULL, 0};
    char archive[1024], cache[1024];
    snprintf(archive, sizeof archive, "%s/twice.tar", work);
    snprintf(cache, sizeof cache, "%s/cache-%zu-%zu", work, strlen(a), strlen(b));
    member(&t, good_name, '0', a, strlen(a));
    member(&t, "./entries/ab/00112233445566778899aabbccddeeff00112233445566778899aabbccddee", '0',
           b, strlen(b));
    end(&t);
    write_all(archive, &t);
    free(t.data);
    int warned = 0;
    progcache_file_options o = PROGCACHE_FILE_OPTIONS_INIT;
    o.log = count_warning;
    o.log_ctx = &warned;
    progcache_store *fs;
    CHECK_OK(progcache_store_file_new(&fs, cache, &o));
    progcache_archive_result res = PROGCACHE_ARCHIVE_RESULT_INIT;
    CHECK_OK(progcache_file_import(&res, progcache_store_as_file(fs), archive, NULL));
    CHECK(res.entries == 1 && res.bytes == strlen(kept) && res.invalid == invalid);
    CHECK(warned == 1);
    uint64_t count;
    CHECK_OK(progcache_store_count(&count, fs));
    CHECK(count == 1);
    progcache_buf out = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache_file_read_entry(&out, progcache_store_as_file(fs),
                                       "ab00112233445566778899aabbccddeeff00112233445566778899"
                                       "aabbccddee"));
    CHECK(out.size == strlen(kept) && !memcmp(out.data, kept, out.size));
    progcache_buf_free(&out);
    progcache_store_free(fs);
}

static void test_duplicates(void)
{
    char *work = test_mkdtemp("arcdup");
    static const char junk[] = "garbage, not a program";
    static const char junk2[] = "other garbage";
    import_twice(work, good_data, junk, good_data, 0); /* a garbage copy never replaces */
    import_twice(work, junk, good_data, good_data, 0); /* a valid one replaces garbage */
    import_twice(work, junk, junk2, junk, 1);          /* neither valid: the first */
    test_rmdtemp(work);
}

int main(void)
{
    test_names();
    test_round_trip();
    test_hostile();
    test_variants();
    test_duplicates();
    puts("test_archive: ok");
    return 0;
}

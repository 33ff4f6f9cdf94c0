/* Explained misses (src/program/explain.c, src/dir/dir_explain.c;
 * issue 35): each entry compile-or-load stores records its key's inputs,
 * and a MISS with PROGCACHE_EXPLAIN=1 (or progcache_explain) names the
 * nearest stored entry and exactly which input differs: an option's value,
 * the NVRTC version, the source, or nothing similar. The index is bounded
 * per program, cleared with the entries, and a damaged or hostile index
 * file (cut short, huge, a link, another user's, writable by others,
 * garbage) is ignored and counted, never followed or trusted. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "cuda_fixtures.h"

static char logged[8192];

static void capture(void *ctx, int level, const char *message)
{
    (void)ctx;
    if (level == PROGCACHE_LOG_INFO && strstr(message, "MISS "))
        snprintf(logged, sizeof logged, "%s", message);
}

static progcache_program program(const char *const *options, size_t n, const char *source,
                                 const char *name)
{
    progcache_program p = fixture_program(PROGCACHE_PROGRAM_NO_LOAD);
    p.nvrtc.target = PROGCACHE_TARGET_PTX;
    p.nvrtc.options = options;
    p.nvrtc.num_options = n;
    p.nvrtc.name = name;
    if (source)
        p.nvrtc.source = source;
    p.kernel = NULL;
    p.log = capture;
    return p;
}

static progcache_status run(progcache *cache, const progcache_program *p)
{
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    logged[0] = '\0';
    CHECK_OK(progcache_compile_or_load(&r, cache, p));
    progcache_status st = r.status;
    progcache_program_result_release(&r);
    return st;
}

/* progcache_explain's text for p. */
static const char *explain(progcache *cache, const progcache_program *p)
{
    static char text[8192];
    progcache_buf out = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache_explain(&out, cache, &p->nvrtc));
    snprintf(text, sizeof text, "%s", out.data ? (const char *)out.data : "");
    progcache_buf_free(&out);
    return text;
}

/* The differences named for the nearest entry (its line after "ago: "). */
static const char *nearest(const char *text)
{
    static char line[1024];
    const char *p = strstr(text, " ago: ");
    const char *nl = p ? strchr(p, '\n') : NULL;
    if (!nl)
        return "";
    snprintf(line, sizeof line, "%.*s", (int)(nl - p - 6), p + 6);
    return line;
}

static uint64_t counter(progcache *cache, size_t offset)
{
    progcache_stats s = PROGCACHE_STATS_INIT;
    CHECK_OK(progcache_stats_get(&s, cache));
    return *(const uint64_t *)(const void *)((const char *)&s + offset);
}
#define COUNT(cache, field) counter(cache, offsetof(progcache_stats, field))

/* Every index file's path (progcache/explain/<2>/<62>) into paths. */
static size_t index_files(char paths[][4096], size_t max, const char *root)
{
    char dir[3000];
    size_t n = 0;
    snprintf(dir, sizeof dir, "%.2900s/progcache/explain", root);
    DIR *top = opendir(dir);
    for (struct dirent *s; top && (s = readdir(top));) {
        if (s->d_name[0] == '.')
            continue;
        char shard[4096];
        if (snprintf(shard, sizeof shard, "%s/%.2s", dir, s->d_name) >= (int)sizeof shard)
            continue;
        DIR *d = opendir(shard);
        for (struct dirent *e; d && (e = readdir(d));)
            if (e->d_name[0] != '.' && n < max)
                snprintf(paths[n++], 4096, "%.3900s/%.62s", shard, e->d_name);
        if (d)
            closedir(d);
    }
    if (top)
        closedir(top);
    return n;
}

static const char *const tile16[] = {"-arch=compute_90", "-DTILE=16"};
static const char *const tile32[] = {"-arch=compute_90", "-DTILE=32"};

static void explained_misses(progcache *cache)
{
    progcache_program p16 = program(tile16, 2, NULL, "scale.cu");
    progcache_program p32 = program(tile32, 2, NULL, "scale.cu");
    CHECK(run(cache, &p16) == PROGCACHE_STATUS_MISS);
    CHECK(logged[0] == '\0'); /* PROGCACHE_EXPLAIN unset: nothing said */
    CHECK(COUNT(cache, explain_records) == 2); /* two identities */
    CHECK(COUNT(cache, explain_made) == 0);

    /* A MISS after an option change, explained through the log. */
    CHECK(setenv("PROGCACHE_EXPLAIN", "1", 1) == 0);
    CHECK(run(cache, &p32) == PROGCACHE_STATUS_MISS);
    CHECK(strstr(logged, "of program \"scale.cu\""));
    /* Exactly that difference, and the last line of the message. */
    const char *want = " ago: option -DTILE=32 was -DTILE=16";
    size_t len = strlen(logged), wlen = strlen(want);
    CHECK(len > wlen && !strcmp(logged + len - wlen, want));
    CHECK(COUNT(cache, explain_made) == 1);
    /* A HIT explains nothing. */
    CHECK(run(cache, &p16) == PROGCACHE_STATUS_HIT && logged[0] == '\0');
    /* Without a callback: the library's own writer, on stderr, each time
     * (not once per process, as its warnings). */
    char err[4200];
    snprintf(err, sizeof err, "%s.stderr", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    fflush(stderr);
    int saved = dup(2), fd = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(saved >= 0 && fd >= 0 && dup2(fd, 2) == 2);
    const char *const tile8[] = {"-arch=compute_90", "-DTILE=8"};
    const char *const tile4[] = {"-arch=compute_90", "-DTILE=4"};
    progcache_program quiet8 = program(tile8, 2, NULL, "scale.cu");
    progcache_program quiet4 = program(tile4, 2, NULL, "scale.cu");
    quiet8.log = quiet4.log = NULL;
    CHECK(run(cache, &quiet8) == PROGCACHE_STATUS_MISS);
    CHECK(run(cache, &quiet4) == PROGCACHE_STATUS_MISS);
    fflush(stderr);
    CHECK(dup2(saved, 2) == 2);
    close(saved);
    close(fd);
    char said[8192] = "";
    FILE *f = fopen(err, "r");
    CHECK(f);
    said[fread(said, 1, sizeof said - 1, f)] = '\0';
    fclose(f);
    unlink(err);
    CHECK(!strncmp(said, "progcache: MISS ", 16));
    CHECK(strstr(said, "option -DTILE=8 was -DTILE=16") ||
          strstr(said, "option -DTILE=8 was -DTILE=32"));
    CHECK(strstr(said, " ago: option -DTILE=4 was -DTILE=8\n"));
    CHECK(unsetenv("PROGCACHE_EXPLAIN") == 0);

    /* The same through progcache_explain: a HIT, then each kind of change. */
    CHECK(!strncmp(explain(cache, &p16), "HIT ", 4));
    progcache_program v = p16;
    v.nvrtc.nvrtc_major = 12;
    v.nvrtc.nvrtc_minor = 9;
    const char *t = explain(cache, &v);
    CHECK(!strncmp(t, "MISS ", 5) && !strncmp(nearest(t), "NVRTC 12.9 was ", 15));
    CHECK(!strchr(nearest(t), ';')); /* nothing else differs */
    progcache_program src = program(tile16, 2, "extern \"C\" __global__ void k() {}", "scale.cu");
    CHECK(!strcmp(nearest(explain(cache, &src)), "source changed"));
    const char *const swapped[] = {"-DTILE=16", "-arch=compute_90"};
    progcache_program order = program(swapped, 2, NULL, "scale.cu");
    CHECK(!strcmp(nearest(explain(cache, &order)),
                  "the same options in another order (the order is in the key)"));
    const char *const more[] = {"-arch=compute_90", "-DTILE=16", "-lineinfo"};
    progcache_program added = program(more, 3, NULL, "scale.cu");
    CHECK(!strcmp(nearest(explain(cache, &added)), "option -lineinfo added"));
    progcache_program fewer = program(tile16, 1, NULL, "scale.cu");
    t = explain(cache, &fewer); /* as near to every -DTILE: the newest named */
    CHECK(!strcmp(nearest(t), "option -DTILE=4 not given now"));
    /* Headers in memory: none before, then one, then other bytes. */
    static const char hsrc[] = "#include \"t.h\"\n"
                               "extern \"C\" __global__ void k(float *a) { a[0] = T; }\n";
    progcache_header h = {"t.h", "#define T 1\n", 0};
    progcache_program hp = program(tile16, 2, hsrc, "headers.cu");
    hp.nvrtc.headers = &h;
    hp.nvrtc.num_headers = 1;
    CHECK(run(cache, &hp) == PROGCACHE_STATUS_MISS);
    h.content = "#define T 2\n";
    CHECK(!strcmp(nearest(explain(cache, &hp)), "headers changed"));
    progcache_program other = program(tile16, 2, NULL, "other.cu");
    t = explain(cache, &other);
    CHECK(strstr(t, "nothing similar is recorded") && !strstr(t, "\n  "));
}

/* At most PROGCACHE__EXPLAIN_KEEP (8) records a program: the oldest go. */
static void bounded(progcache *cache, const char *root)
{
    char opt[16][32];
    for (int i = 0; i < 12; i++) {
        snprintf(opt[i], sizeof opt[i], "-DN=%d", i);
        const char *const o[] = {"-arch=compute_90", opt[i]};
        progcache_program p = program(o, 2, NULL, "bound.cu");
        CHECK(run(cache, &p) == PROGCACHE_STATUS_MISS);
    }
    char paths[8][4096];
    size_t n = index_files(paths, 8, root);
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        CHECK(stat(paths[i], &st) == 0 && st.st_size < 8 * 8192);
    }
    const char *const o[] = {"-arch=compute_90", "-DN=99"};
    progcache_program p = program(o, 2, NULL, "bound.cu");
    const char *t = explain(cache, &p);
    CHECK(strstr(t, "option -DN=99 was -DN=11")); /* the newest is kept */
    CHECK(progcache_clear(cache) == PROGCACHE_OK);
    CHECK(index_files(paths, 8, root) == 0); /* cleared with the entries */
}

/* At most 64 index files a shard: a new one makes the oldest go. */
static void shard_bound(progcache *cache, const char *root)
{
    const char *const o1[] = {"-arch=compute_90", "-DS=1"};
    const char *const o2[] = {"-arch=compute_90", "-DS=2"};
    progcache_program p1 = program(o1, 2, NULL, "shard.cu");
    progcache_program p2 = program(o2, 2, NULL, "shard.cu");
    CHECK(run(cache, &p1) == PROGCACHE_STATUS_MISS);
    char paths[8][4096];
    CHECK(index_files(paths, 8, root) == 2);
    char shard[4096], path[4200];
    snprintf(shard, sizeof shard, "%s", paths[0]);
    *strrchr(shard, '/') = '\0';
    /* 70 older index files of other programs in that shard. */
    for (int i = 0; i < 70; i++) {
        snprintf(path, sizeof path, "%s/%062d", shard, i);
        fixture_write_file(path, "x\n", 2);
        struct timespec t[2] = {{1000000 + i, 0}, {1000000 + i, 0}};
        CHECK(utimensat(AT_FDCWD, path, t, 0) == 0);
    }
    CHECK(unlink(paths[0]) == 0); /* the next store makes it anew */
    CHECK(run(cache, &p2) == PROGCACHE_STATUS_MISS);
    size_t n = 0;
    int oldest_gone = 1, newest_kept = 0;
    DIR *d = opendir(shard);
    for (struct dirent *e; d && (e = readdir(d));) {
        n += e->d_name[0] != '.';
        oldest_gone &= strcmp(e->d_name + 56, "000000") != 0;
        newest_kept |= !strcmp(e->d_name + 56, "000069");
    }
    if (d)
        closedir(d);
    CHECK(n == 64 && oldest_gone && newest_kept);
    CHECK(access(paths[0], F_OK) == 0); /* the new one is kept */
}

/* Write bytes over every index file (replacing it). */
static void overwrite_all(const char *root, const char *bytes, size_t len)
{
    char paths[8][4096];
    size_t n = index_files(paths, 8, root);
    CHECK(n == 2);
    for (size_t i = 0; i < n; i++) {
        CHECK(unlink(paths[i]) == 0);
        int fd = open(paths[i], O_WRONLY | O_CREAT | O_EXCL, 0600);
        CHECK(fd >= 0);
        size_t done = 0;
        while (done < len) {
            ssize_t w = write(fd, bytes + done, len - done);
            CHECK(w > 0);
            done += (size_t)w;
        }
        close(fd);
    }
}

/* The index as someone else left it: each is ignored, the miss is still
 * answered (nothing similar), and a refusal is counted. */
static void hostile(progcache *cache, const char *root)
{
    progcache_program p16 = program(tile16, 2, NULL, "scale.cu");
    progcache_program p32 = program(tile32, 2, NULL, "scale.cu");
    CHECK(run(cache, &p16) == PROGCACHE_STATUS_MISS);
    char paths[8][4096];
    CHECK(index_files(paths, 8, root) == 2);
    char good[8192];
    FILE *f = fopen(paths[0], "r");
    CHECK(f);
    size_t good_len = fread(good, 1, sizeof good - 1, f);
    fclose(f);
    CHECK(good_len > 64 && good[good_len - 1] == '\n');
    CHECK(strstr(explain(cache, &p32), "was -DTILE=16"));

    /* Cut short: the partial line is not a record. */
    overwrite_all(root, good, good_len - 5);
    CHECK(strstr(explain(cache, &p32), "nothing similar"));
    /* Garbage lines and a line of too few fields: skipped. */
    const char junk[] = "not a record\n\n0123 v=1.0\n";
    overwrite_all(root, junk, sizeof junk - 1);
    CHECK(strstr(explain(cache, &p32), "nothing similar"));
    /* A byte the writer escapes (an ESC of a terminal sequence): not a
     * record, and never printed. */
    char escaped[8192];
    memcpy(escaped, good, good_len);
    char *tile = memmem(escaped, good_len, "TILE=16", 7);
    CHECK(tile);
    tile[5] = '\x1b';
    overwrite_all(root, escaped, good_len);
    CHECK(strstr(explain(cache, &p32), "nothing similar"));
    CHECK(!strchr(explain(cache, &p32), '\x1b'));

    /* Huge: 1 MiB is not read. */
    uint64_t refused = COUNT(cache, explain_refused);
    char *huge = malloc(1 << 20);
    CHECK(huge);
    for (size_t i = 0; i < (1 << 20); i += good_len)
        memcpy(huge + i, good, (1 << 20) - i < good_len ? (1 << 20) - i : good_len);
    overwrite_all(root, huge, 1 << 20);
    free(huge);
    CHECK(strstr(explain(cache, &p32), "nothing similar"));
    CHECK(COUNT(cache, explain_refused) >= refused + 2);

    /* Writable by others, and another user's (in a private cache). */
    overwrite_all(root, good, good_len);
    CHECK(strstr(explain(cache, &p32), "was -DTILE=16")); /* whole again: used */
    CHECK(index_files(paths, 8, root) == 2);
    for (int i = 0; i < 2; i++)
        CHECK(chmod(paths[i], 0666) == 0);
    refused = COUNT(cache, explain_refused);
    CHECK(strstr(explain(cache, &p32), "nothing similar"));
    CHECK(COUNT(cache, explain_refused) == refused + 2);
    for (int i = 0; i < 2; i++)
        CHECK(chmod(paths[i], 0600) == 0);
    if (geteuid() == 0) {
        for (int i = 0; i < 2; i++)
            CHECK(chown(paths[i], 54321, 54321) == 0);
        CHECK(strstr(explain(cache, &p32), "nothing similar"));
        /* Nor removed: clear leaves another user's files in a private
         * cache (rule 2). */
        CHECK(progcache_clear(cache) == PROGCACHE_OK);
        CHECK(access(paths[0], F_OK) == 0 && access(paths[1], F_OK) == 0);
        for (int i = 0; i < 2; i++)
            CHECK(chown(paths[i], 0, 0) == 0);
    }

    /* A link at the index file, to a file holding a good record: refused,
     * never followed; a store replaces the link, not its target. */
    char target[4200];
    snprintf(target, sizeof target, "%s/progcache/planted", root);
    f = fopen(target, "w");
    CHECK(f && fwrite(good, 1, good_len, f) == good_len);
    fclose(f);
    for (int i = 0; i < 2; i++)
        CHECK(unlink(paths[i]) == 0 && symlink(target, paths[i]) == 0);
    refused = COUNT(cache, explain_refused);
    CHECK(strstr(explain(cache, &p32), "nothing similar"));
    CHECK(COUNT(cache, explain_refused) == refused + 2);
    CHECK(run(cache, &p32) == PROGCACHE_STATUS_MISS); /* stores, writes the index */
    struct stat st;
    CHECK(stat(target, &st) == 0 && (size_t)st.st_size == good_len); /* untouched */
    CHECK(lstat(paths[0], &st) == 0 && S_ISREG(st.st_mode));
    CHECK(unlink(target) == 0);

    /* A link where a shard directory belongs: refused (links_refused). */
    char shard[4096], aside[4096];
    snprintf(shard, sizeof shard, "%s", paths[0]);
    *strrchr(shard, '/') = '\0';
    snprintf(aside, sizeof aside, "%s/progcache/aside", root);
    CHECK(rename(shard, aside) == 0 && symlink(aside, shard) == 0);
    uint64_t links = COUNT(cache, links_refused);
    const char *const tile64[] = {"-arch=compute_90", "-DTILE=64"};
    progcache_program p64 = program(tile64, 2, NULL, "scale.cu");
    (void)explain(cache, &p64); /* a miss: both index files are read */
    CHECK(COUNT(cache, links_refused) > links);
    CHECK(unlink(shard) == 0 && rename(aside, shard) == 0);
}

int main(void)
{
    unsetenv("PROGCACHE_EXPLAIN");
    char *dir = NULL;
    progcache *cache = test_cache_tmp(&dir, "explain");
    explained_misses(cache);
    test_cache_done(cache, dir);

    cache = test_cache_tmp(&dir, "explain-bound");
    bounded(cache, dir);
    test_cache_done(cache, dir);

    cache = test_cache_tmp(&dir, "explain-shard");
    shard_bound(cache, dir);
    test_cache_done(cache, dir);

    cache = test_cache_tmp(&dir, "explain-hostile");
    hostile(cache, dir);
    test_cache_done(cache, dir);
    printf("ok\n");
    return 0;
}

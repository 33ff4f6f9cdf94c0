/* The PCH file's check (src/pch/pch_verify.c): a PCH is read and hashed
 * in full (SHA-256) only when its identity (device, inode, size,
 * modification and change time) is not the one its stamp vouches for.
 *
 *  - Made and used: the creator stamps it, no use reads it again.
 *  - Bytes changed with the identity changed (a write whose modification
 *    time is put back, a damaged copy renamed over it with its times):
 *    read in full, rejected, the compile the same bytes as without a PCH.
 *  - Times moved, bytes the same (touch): read in full once, stamped
 *    again, then not read.
 *  - Stamps that are not trusted, over a damaged PCH: another user's, one
 *    others can write, a link, one edited by hand, one naming another PCH:
 *    each is no stamp, the file is read in full and the damage caught.
 *    The stamp progcache itself writes for a file whose times moved is
 *    trusted (the control: the file is not read).
 *  - The in-process tier keeps the identity in memory: a damaged private
 *    PCH is read in full and dropped.
 *  - A manifest of the earlier format (version 1, a 64-bit checksum) is
 *    rejected and the PCH made again. */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "pch/pch_tier.h"
#include "pch_fixtures.h"
#include "progcache/cuda.h"
#include "sha256.h"

static char pch_dir[800];

static void set_pch_dir(const char *cache_dir)
{
    snprintf(pch_dir, sizeof pch_dir, "%s/progcache/pch-%u", cache_dir, (unsigned)geteuid());
}

static const char *base(const char *path) { return strrchr(path, '/') + 1; }

static void stamp_path(char *out, size_t len, const char *pch)
{
    snprintf(out, len, "%s/%.64s.stamp", pch_dir, base(pch));
}

/* The SHA-256 the manifest of pch records. */
static void manifest_sha(const char *pch, unsigned char sha[32])
{
    char path[1000];
    snprintf(path, sizeof path, "%s/%.64s.manifest", pch_dir, base(pch));
    size_t len;
    char *text = test_read_file(path, &len);
    CHECK(text != NULL);
    pch_manifest m;
    CHECK_OK(progcache__pch_manifest_parse(&m, text, len));
    memcpy(sha, m.pch_sha, 32);
    progcache__pch_manifest_free(&m);
    free(text);
}

/* A compile of variant v; 1 when it used the PCH. The artifact is checked
 * against the one made without the tier each time. */
static int compile_checked(progcache *cache, int v, logbook *book)
{
    progcache_stats before = stats_of(cache);
    compiled c = compile_v(cache, v, 0, "h3", PROGCACHE_TARGET_CUBIN, note, book);
    compiled p = plain_v(v, "h3", PROGCACHE_TARGET_CUBIN);
    CHECK(same(&c, &p));
    free(c.bytes);
    free(p.bytes);
    return stats_of(cache).pch_hits == before.pch_hits + 1;
}

/* Change a byte in the middle of pch, then put its modification time back:
 * only the change time says it moved. */
static void damage_keep_mtime(const char *pch)
{
    struct stat st;
    CHECK(stat(pch, &st) == 0);
    int fd = open(pch, O_RDWR);
    CHECK(fd >= 0);
    unsigned char c;
    CHECK(pread(fd, &c, 1, st.st_size / 2) == 1);
    c ^= 0x5a;
    CHECK(pwrite(fd, &c, 1, st.st_size / 2) == 1);
    const struct timespec times[2] = {st.st_atim, st.st_mtim};
    CHECK(futimens(fd, times) == 0);
    close(fd);
    struct stat now;
    CHECK(stat(pch, &now) == 0);
    CHECK(now.st_ino == st.st_ino && now.st_size == st.st_size &&
          now.st_mtim.tv_sec == st.st_mtim.tv_sec && now.st_mtim.tv_nsec == st.st_mtim.tv_nsec);
}

/* A damaged copy renamed over pch with its times (cp -p, then mv). */
static void damage_by_copy(const char *pch)
{
    char tmp[1000];
    snprintf(tmp, sizeof tmp, "%s.copy", pch);
    size_t len;
    char *bytes = test_read_file(pch, &len);
    CHECK(bytes != NULL);
    bytes[len / 3] ^= 0x11;
    struct stat st;
    CHECK(stat(pch, &st) == 0);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0600);
    CHECK(fd >= 0 && write(fd, bytes, len) == (ssize_t)len);
    const struct timespec times[2] = {st.st_atim, st.st_mtim};
    CHECK(futimens(fd, times) == 0);
    close(fd);
    CHECK(rename(tmp, pch) == 0);
    free(bytes);
}

/* The stamp progcache writes for pch as it is now (with the manifest's
 * SHA-256, whatever the bytes). */
static void stamp_as_now(const char *pch)
{
    unsigned char sha[32];
    manifest_sha(pch, sha);
    struct stat st;
    CHECK(stat(pch, &st) == 0);
    pch_ident id;
    progcache__pch_ident_of(&id, &st);
    int d = open(pch_dir, O_RDONLY | O_DIRECTORY);
    CHECK(d >= 0);
    progcache__pch_stamp_write(d, base(pch), sha, &id);
    close(d);
}

static unsigned long checks(void)
{
    return __atomic_load_n(&progcache__pch_full_checks, __ATOMIC_RELAXED);
}

/* Made, stamped, used without reading it; touched: read once, then not. */
static void test_stamped(void)
{
    char *dir, pch[1000], stamp[1100];
    progcache *cache = open_warm(&dir, "pchstamp", 10, pch, sizeof pch);
    set_pch_dir(dir);
    stamp_path(stamp, sizeof stamp, pch);
    struct stat st;
    CHECK(lstat(stamp, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
          (st.st_mode & 077) == 0);
    unsigned long n = checks();
    logbook book = {""};
    CHECK(compile_checked(cache, 13, &book) && compile_checked(cache, 14, &book));
    CHECK(checks() == n);

    /* Same bytes, other times (the change time moves): read once. */
    CHECK(utimensat(AT_FDCWD, pch, NULL, 0) == 0);
    CHECK(compile_checked(cache, 15, &book));
    CHECK(checks() == n + 1);
    CHECK(compile_checked(cache, 16, &book));
    CHECK(checks() == n + 1);
    close_cache(cache, dir);
}

/* Damage that keeps every part of the identity but the change time, and
 * a damaged copy in its place: each read in full and rejected. */
static void damaged_identity(const char *tag, void (*harm)(const char *pch))
{
    char *dir, pch[1000];
    progcache *cache = open_warm(&dir, tag, 20, pch, sizeof pch);
    set_pch_dir(dir);
    harm(pch);
    progcache_stats before = stats_of(cache);
    unsigned long n = checks();
    logbook book = {""};
    CHECK(!compile_checked(cache, 23, &book));
    CHECK(checks() > n); /* read in full (the new PCH made then is hashed too) */
    CHECK(stats_of(cache).pch_rejected == before.pch_rejected + 1);
    CHECK(strstr(book.text, "damaged (SHA-256)") != NULL);
    CHECK(access(pch, F_OK) != 0); /* removed (and made again) */
    close_cache(cache, dir);
}

static void test_identity_changed(void)
{
    damaged_identity("pchkeepmtime", damage_keep_mtime);
    damaged_identity("pchcopied", damage_by_copy);
}

/* ---- stamps that are not trusted ------------------------------------------------- */

static void forge_other_user(const char *stamp)
{
    CHECK(chown(stamp, 4242, 4242) == 0);
}

static void forge_group_writable(const char *stamp)
{
    CHECK(chmod(stamp, 0620) == 0);
}

static void aside_path(char *out, size_t len)
{
    snprintf(out, len, "%s/aside.stamp", work);
}

static void forge_link(const char *stamp)
{
    char aside[1200];
    aside_path(aside, sizeof aside);
    CHECK(rename(stamp, aside) == 0);
    CHECK(symlink(aside, stamp) == 0);
}

/* The identity line edited by hand (its digest line left as it was). */
static void forge_edited(const char *stamp)
{
    size_t len;
    char *text = test_read_file(stamp, &len);
    CHECK(text != NULL);
    char *file = strstr(text, "\nfile ");
    CHECK(file != NULL);
    char *last = strchr(file + 1, '\n');
    CHECK(last != NULL);
    last[-1] = last[-1] == '9' ? '8' : (char)(last[-1] + 1); /* the change time */
    write_text(stamp, text);
    CHECK(chmod(stamp, 0600) == 0);
    free(text);
}

/* A stamp for another PCH file name of the same key. */
static void forge_other_pch(const char *stamp)
{
    size_t len;
    char *text = test_read_file(stamp, &len);
    CHECK(text != NULL);
    char *dash = strstr(text, ".pch\n");
    CHECK(dash != NULL);
    dash[-1] = dash[-1] == '0' ? '1' : '0';
    write_text(stamp, text);
    CHECK(chmod(stamp, 0600) == 0);
    free(text);
}

/* A PCH changed since its stamp (damaged: a byte changed; else only its
 * times), then the stamp progcache writes for it as it is now, forged one
 * way (or not): 1 when the tier read the file in full, 0 when it trusted
 * the stamp. A damaged PCH read in full is rejected; the compile gives the
 * bytes it gives without a PCH either way. */
static int read_through(const char *tag, void (*forge)(const char *stamp), int damage)
{
    char *dir, pch[1000], stamp[1100];
    progcache *cache = open_warm(&dir, tag, 30, pch, sizeof pch);
    set_pch_dir(dir);
    stamp_path(stamp, sizeof stamp, pch);
    if (damage)
        damage_keep_mtime(pch);
    else
        CHECK(utimensat(AT_FDCWD, pch, NULL, 0) == 0);
    stamp_as_now(pch);
    if (forge)
        forge(stamp);
    progcache_stats before = stats_of(cache);
    unsigned long n = checks();
    logbook book = {""};
    int hit = compile_checked(cache, 33, &book);
    int full = checks() > n;
    if (damage) {
        CHECK(full && !hit);
        CHECK(stats_of(cache).pch_rejected == before.pch_rejected + 1);
        CHECK(strstr(book.text, "damaged (SHA-256)") != NULL);
    } else {
        CHECK(hit);
    }
    char aside[1200];
    aside_path(aside, sizeof aside);
    (void)unlink(aside);
    close_cache(cache, dir);
    return full;
}

static void test_untrusted_stamps(void)
{
    /* The control: the stamp progcache itself writes is trusted (this
     * user vouches for the file), so the file is not read. */
    CHECK(!read_through("pchforgeself", NULL, 0));
    /* Each of these is no stamp: read in full, the damage caught. */
    if (geteuid() == 0)
        CHECK(read_through("pchforgeuser", forge_other_user, 1));
    CHECK(read_through("pchforgemode", forge_group_writable, 1));
    CHECK(read_through("pchforgelink", forge_link, 1));
    CHECK(read_through("pchforgeedit", forge_edited, 1));
    CHECK(read_through("pchforgename", forge_other_pch, 1));
}

/* ---- the in-process tier ------------------------------------------------------------ */

static void test_inprocess(void)
{
    setenv("PROGCACHE_PCH", "inprocess", 1);
    char *dir;
    progcache *cache = open_cache(&dir, "pchstampin");
    logbook book = {""};
    for (int v = 40; v < 43; v++)
        compile_checked(cache, v, &book);
    CHECK(stats_of(cache).pch_hits == 1);
    unsigned long n = checks();
    CHECK(compile_checked(cache, 43, &book));
    CHECK(checks() == n);
    /* The private PCH, damaged keeping its modification time. */
    set_pch_dir(dir);
    char proc[1200] = "", pch[1600] = "";
    DIR *d = opendir(pch_dir);
    for (struct dirent *e; d && (e = readdir(d));)
        if (!strncmp(e->d_name, "proc-", 5))
            snprintf(proc, sizeof proc, "%s/%s", pch_dir, e->d_name);
    if (d)
        closedir(d);
    CHECK(proc[0]);
    d = opendir(proc);
    for (struct dirent *e; d && (e = readdir(d));)
        if (strstr(e->d_name, ".pch"))
            snprintf(pch, sizeof pch, "%s/%s", proc, e->d_name);
    if (d)
        closedir(d);
    CHECK(pch[0]);
    damage_keep_mtime(pch);
    progcache_stats before = stats_of(cache);
    CHECK(!compile_checked(cache, 44, &book));
    CHECK(checks() > n); /* read in full (and a new one made and hashed) */
    CHECK(stats_of(cache).pch_rejected == before.pch_rejected + 1);
    close_cache(cache, dir);
    unsetenv("PROGCACHE_PCH");
}

/* ---- a manifest of the earlier format ------------------------------------------------- */

static void test_manifest_v1(void)
{
    char *dir, pch[1000], path[1100];
    progcache *cache = open_warm(&dir, "pchv1", 50, pch, sizeof pch);
    set_pch_dir(dir);
    snprintf(path, sizeof path, "%s/%.64s.manifest", pch_dir, base(pch));
    /* Version 1's first line and 16-hex checksum, with a digest that
     * matches: a manifest an earlier progcache wrote. */
    size_t len;
    char *text = test_read_file(path, &len);
    CHECK(text != NULL && !strncmp(text, "progcache-pch-manifest 2\n", 25));
    text[23] = '1';
    char *sum = strstr(text, ".pch ");
    CHECK(sum != NULL);
    sum = strchr(sum + 5, ' ') + 1;
    memmove(sum + 16, sum + 64, strlen(sum + 64) + 1);
    char *digest = strstr(text, "digest ");
    CHECK(digest != NULL);
    unsigned char d[32];
    CHECK_OK(progcache__sha256_oneshot(d, text, (size_t)(digest - text)));
    progcache__hex(digest + 7, d, 32);
    digest[71] = '\n';
    digest[72] = '\0';
    write_text(path, text);
    free(text);
    progcache_stats before = stats_of(cache);
    logbook book = {""};
    CHECK(!compile_checked(cache, 53, &book));
    CHECK(stats_of(cache).pch_rejected == before.pch_rejected + 1);
    CHECK(strstr(book.text, "version 1") != NULL);
    /* Made again from the new format: used from the next compiles on. */
    compile_checked(cache, 54, &book);
    CHECK(compile_checked(cache, 55, &book));
    close_cache(cache, dir);
}

PCH_TEST_MAIN("test_pch_stamp", test_stamped, test_identity_changed, test_untrusted_stamps,
              test_inprocess, test_manifest_v1)

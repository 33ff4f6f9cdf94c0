/* Issue 20, items 5, 6 and 10, at the library: the modes of everything a
 * store makes under umasks 000, 022 and 077 (private and group caches), a
 * store over another user's cache directory (written nothing into, one
 * warning, counted in the process's own statistics), and settings and
 * state files of another user refused. Other users are plain uids
 * (setresuid in a child), so it needs root; skips otherwise. The CLI side,
 * with real users and a group, is tests/admin/test_tool_perm.py. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "fs.h"
#include "progcache/cache.h"
#include "progcache/file.h"
#include "progcache/stats.h"
#include "progcache/sys/store.h"
#include "dir/dir.h"
#include "store/store_calls.h"

#define ALICE 54321u
#define CAROL 54322u

static int warnings;
static char last_warning[1024];

static void count_log(void *ctx, int level, const char *message)
{
    (void)ctx;
    if (level >= PROGCACHE_LOG_WARN) {
        warnings++;
        snprintf(last_warning, sizeof last_warning, "%s", message);
    }
}

/* Every directory (dir_mode) and file (entry_mode under entries/, else
 * state_mode) below path, recursively; and all owned by uid. */
static void check_modes(const char *path, int depth, mode_t dir_mode, mode_t entry_mode,
                        mode_t state_mode, uid_t uid)
{
    struct stat st;
    CHECK(lstat(path, &st) == 0);
    int in_entries = strstr(path, "/entries/") != NULL;
    mode_t want = S_ISDIR(st.st_mode) ? dir_mode : in_entries ? entry_mode : state_mode;
    if ((st.st_mode & 07777) != want || st.st_uid != uid)
        fprintf(stderr, "%s: mode %04o uid %u, want %04o uid %u\n", path,
                (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid, (unsigned)want,
                (unsigned)uid);
    CHECK((st.st_mode & 07777) == want && st.st_uid == uid);
    if (!S_ISDIR(st.st_mode) || depth > 4)
        return;
    DIR *d = opendir(path);
    CHECK(d != NULL);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char sub[4096];
        snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
        check_modes(sub, depth + 1, dir_mode, entry_mode, state_mode, uid);
    }
    closedir(d);
}

static void use_cache(const char *dir, unsigned int flags)
{
    progcache *cache;
    progcache_options o = PROGCACHE_OPTIONS_INIT;
    o.flags = flags | PROGCACHE_NO_REMOTE;
    CHECK_OK(progcache_open(&cache, dir, &o));
    CHECK_OK(progcache_put(cache, "k", 1, "bytes", 5));
    CHECK_OK(progcache_settings_set(dir, "max_size", "1G"));
    progcache_close(cache);
}

static void test_private_modes(void)
{
    const mode_t masks[] = {0, 022, 077};
    for (size_t i = 0; i < 3; i++) {
        char *base = test_mkdtemp("perm-private");
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/a/b/cache", base);
        mode_t old = umask(masks[i]);
        use_cache(dir, 0);
        umask(old);
        check_modes(dir, 0, 0700, 0600, 0600, geteuid());
        char parent[4200];
        snprintf(parent, sizeof parent, "%s/a", base);
        struct stat st;
        CHECK(stat(parent, &st) == 0 && (st.st_mode & 07777) == 0700);
        test_rmdtemp(base);
    }
}

static void test_group_modes(void)
{
    const mode_t masks[] = {0, 022, 077};
    for (size_t i = 0; i < 3; i++) {
        char *base = test_mkdtemp("perm-group");
        /* The team's directory: setgid, of a group of ours. */
        CHECK(chmod(base, 02770) == 0);
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/cache", base);
        mode_t old = umask(masks[i]);
        /* The flag for progcache_open; progcache_settings_set knows the
         * group from the environment only (a number: gid 0, root's). */
        CHECK(setenv("PROGCACHE_SHARED_GROUP", "0", 1) == 0);
        use_cache(dir, PROGCACHE_FILE_SHARED_GROUP);
        CHECK(unsetenv("PROGCACHE_SHARED_GROUP") == 0);
        umask(old);
        check_modes(dir, 0, 02770, 0640, 0660, geteuid());
        /* A private open of the team's directory (the setting forgotten)
         * leaves its modes alone, and says why once; the team's settings
         * file (0660: any member's to write) is not honoured by an open
         * that does not trust the group, and said so (issue 29). */
        warnings = 0;
        progcache_file_options fo = PROGCACHE_FILE_OPTIONS_INIT;
        fo.log = count_log;
        progcache_store *st;
        CHECK_OK(progcache_store_file_new(&st, dir, &fo));
        CHECK(warnings == 2 && strstr(last_warning, "PROGCACHE_SHARED_GROUP") &&
              strstr(last_warning, "progcache/config is ignored"));
        progcache_store_free(st);
        check_modes(dir, 0, 02770, 0640, 0660, geteuid());
        test_rmdtemp(base);
    }
}

/* A directory of this user's alone inside a team's cache (the PCH tier's
 * pch-<uid>, made through the store that owns the layout): exactly 0700,
 * no setgid, whatever the umask; one of looser mode is refused; a
 * read-only store makes none. */
static void test_private_dir(void)
{
    char *base = test_mkdtemp("perm-private");
    CHECK(chmod(base, 02770) == 0);
    char dir[4200], why[256], path[4300], place[64];
    snprintf(dir, sizeof dir, "%s/cache", base);
    CHECK(setenv("PROGCACHE_SHARED_GROUP", "0", 1) == 0);
    use_cache(dir, PROGCACHE_FILE_SHARED_GROUP);
    mode_t old = umask(0);
    progcache_file_options fo = PROGCACHE_FILE_OPTIONS_INIT;
    fo.flags = PROGCACHE_FILE_SHARED_GROUP;
    progcache_store *st;
    CHECK_OK(progcache_store_file_new(&st, dir, &fo));
    int fd = progcache__store_open_private_dir(st, PROGCACHE__PLACE_PCH, why, sizeof why);
    CHECK(fd >= 0);
    close(fd);
    struct stat sb;
    progcache__store_place_path(place, sizeof place, PROGCACHE__PLACE_PCH);
    snprintf(path, sizeof path, "%s/%s", dir, place);
    char want[64];
    snprintf(want, sizeof want, "progcache/pch-%u", (unsigned)geteuid());
    CHECK(!strcmp(place, want));
    CHECK(stat(path, &sb) == 0 && (sb.st_mode & 07777) == 0700 && sb.st_uid == geteuid());
    CHECK(chmod(path, 0750) == 0);
    CHECK(progcache__store_open_private_dir(st, PROGCACHE__PLACE_PCH, why, sizeof why) < 0 &&
          errno == EPERM);
    CHECK(strstr(why, "mode 0750") != NULL);
    progcache_store_free(st);
    /* Read-only, and the place missing: nothing is made. */
    CHECK(rmdir(path) == 0);
    fo.flags = PROGCACHE_FILE_READONLY;
    CHECK_OK(progcache_store_file_new(&st, dir, &fo));
    CHECK(progcache__store_open_private_dir(st, PROGCACHE__PLACE_PCH, why, sizeof why) < 0 &&
          errno == EROFS);
    CHECK(stat(path, &sb) != 0 && errno == ENOENT);
    progcache_store_free(st);
    umask(old);
    CHECK(unsetenv("PROGCACHE_SHARED_GROUP") == 0);
    test_rmdtemp(base);
}

/* In a child as uid: make a cache at dir holding key "k". */
static void as_user_make(uid_t uid, const char *dir)
{
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        if (setgroups(0, NULL) != 0 || setresgid(uid, uid, uid) != 0 ||
            setresuid(uid, uid, uid) != 0)
            _exit(2);
        progcache_store *s;
        if (progcache_store_file_new(&s, dir, NULL) != PROGCACHE_OK ||
            s->put(s, "k", 1, "alice", 5) != PROGCACHE_OK)
            _exit(3);
        progcache_store_free(s);
        _exit(0);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_foreign(void)
{
    char *base = test_mkdtemp("perm-foreign");
    CHECK(chmod(base, 0755) == 0);
    char home[4200], dir[4300];
    snprintf(home, sizeof home, "%s/alice", base);
    CHECK(mkdir(home, 0755) == 0 && chown(home, ALICE, ALICE) == 0);
    snprintf(dir, sizeof dir, "%s/cache", home);
    as_user_make(ALICE, dir);

    /* root opens alice's cache: one warning, nothing written. */
    warnings = 0;
    progcache *cache;
    progcache_options o = PROGCACHE_OPTIONS_INIT;
    o.flags = PROGCACHE_NO_REMOTE;
    o.log = count_log;
    CHECK_OK(progcache_open(&cache, dir, &o));
    CHECK(warnings == 1 && strstr(last_warning, "never writes") && strstr(last_warning, "54321"));
    progcache_buf out = PROGCACHE_BUF_INIT;
    /* alice's entry is not root's to trust: a miss. */
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_get(&out, cache, "k", 1));
    CHECK_RC(PROGCACHE_EIO, progcache_put(cache, "x", 1, "root", 4));
    CHECK(strstr(progcache_error_last(), "belongs to") != NULL);
    progcache_stats s = PROGCACHE_STATS_INIT;
    CHECK_OK(progcache_stats_get(&s, cache));
    CHECK(s.version == PROGCACHE_STATS_VERSION && s.foreign_not_stored == 1 && s.misses >= 1);
    CHECK(warnings == 1);
    progcache_close(cache);
    progcache_buf_free(&out);
    CHECK(progcache_settings_set(dir, "max_size", "1K") != PROGCACHE_OK);
    check_modes(dir, 0, 0700, 0600, 0600, ALICE);

    /* Nor is a cache made inside alice's directory. */
    char inside[4400];
    snprintf(inside, sizeof inside, "%s/new", home);
    progcache_store *st = NULL;
    CHECK_RC(PROGCACHE_EIO, progcache_store_file_new(&st, inside, NULL));
    CHECK(strstr(progcache_error_last(), "another user's directory") && access(inside, F_OK) != 0);

    /* root's settings file in alice's cache is honoured by alice (checked
     * in her child); carol's is refused, naming it. */
    char config[4400];
    snprintf(config, sizeof config, "%s/progcache/config", dir);
    FILE *f = fopen(config, "w");
    CHECK(f && fputs("max_size = 1K\n", f) >= 0 && fclose(f) == 0);
    CHECK(chown(config, CAROL, CAROL) == 0 && chmod(config, 0644) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        if (setgroups(0, NULL) || setresgid(ALICE, ALICE, ALICE) || setresuid(ALICE, ALICE, ALICE))
            _exit(2);
        progcache_store *a;
        int rc = progcache_store_file_new(&a, dir, NULL);
        if (rc != PROGCACHE_EINVAL || !strstr(progcache_error_last(), config) ||
            !strstr(progcache_error_last(), "54322"))
            _exit(3);
        if (chown(config, 0, 0) == 0)
            _exit(4); /* alice cannot: the test is wrong */
        _exit(0);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(chown(config, 0, 0) == 0);
    pid = fork();
    if (pid == 0) {
        if (setgroups(0, NULL) || setresgid(ALICE, ALICE, ALICE) || setresuid(ALICE, ALICE, ALICE))
            _exit(2);
        progcache_file *a;
        if (progcache_file_open(&a, dir, NULL) != PROGCACHE_OK)
            _exit(3);
        const progcache_setting *cap =
            progcache_settings_find(progcache_file_settings(a), "max_size");
        int ok = cap && cap->number == 1024;
        progcache_file_close(a);
        _exit(ok ? 0 : 4);
    }
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(unlink(config) == 0);

    /* State, lock and statistics files of carol's: refused (warned), the
     * store works on private counters. */
    const char *names[] = {"state", "lock", "stats"};
    for (int i = 0; i < 3; i++) {
        char p[4400];
        snprintf(p, sizeof p, "%s/progcache/%s", dir, names[i]);
        /* Open to alice through her group: only the owner check stops it. */
        CHECK(chown(p, CAROL, ALICE) == 0 && chmod(p, 0660) == 0);
    }
    /* And a directory of carol's, open to all, where progcache/tmp/ should
     * be: not alice's to fix; named in one warning. */
    char tmp[4400];
    snprintf(tmp, sizeof tmp, "%s/progcache/tmp", dir);
    CHECK(chown(tmp, CAROL, CAROL) == 0 && chmod(tmp, 0777) == 0);
    pid = fork();
    if (pid == 0) {
        if (setgroups(0, NULL) || setresgid(ALICE, ALICE, ALICE) || setresuid(ALICE, ALICE, ALICE))
            _exit(2);
        warnings = 0;
        progcache_file_options fo = PROGCACHE_FILE_OPTIONS_INIT;
        fo.log = count_log;
        progcache_store *a;
        if (progcache_store_file_new(&a, dir, &fo) != PROGCACHE_OK)
            _exit(3);
        int ok = warnings == 4 && strstr(last_warning, "/tmp (mode 0777, owner uid 54322)") &&
                 a->put(a, "y", 1, "alice", 5) == PROGCACHE_OK;
        if (!ok)
            fprintf(stderr, "%d warnings, the last: %s (%s)\n", warnings, last_warning,
                    progcache_error_last());
        progcache_store_free(a);
        _exit(ok ? 0 : 4);
    }
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    test_rmdtemp(base);
}

/* The fs helpers: the mode asked for, whatever the umask. */
static void test_fs_modes(void)
{
    char *base = test_mkdtemp("perm-fs");
    int dirfd = open(base, O_RDONLY | O_DIRECTORY);
    CHECK(dirfd >= 0);
    mode_t old = umask(077);
    char name[64];
    int fd = progcache__fs_create_temp_exact(dirfd, "entry-", 0660, name, sizeof name);
    CHECK(fd >= 0);
    struct stat st;
    CHECK(fstat(fd, &st) == 0 && (st.st_mode & 07777) == 0660);
    close(fd);
    /* A file for the user (an export) keeps the umask's say. */
    fd = progcache__fs_create_temp(dirfd, "out-", 0666, name, sizeof name);
    CHECK(fd >= 0 && fstat(fd, &st) == 0 && (st.st_mode & 07777) == 0600);
    close(fd);
    CHECK(progcache__fs_mkdirat_mode(dirfd, "d", 02770, (gid_t)-1) == 0);
    CHECK(fstatat(dirfd, "d", &st, 0) == 0 && (st.st_mode & 07777) == 02770);
    CHECK(progcache__fs_mkdirat_mode(dirfd, "d", 0700, (gid_t)-1) == 1);
    CHECK(fstatat(dirfd, "d", &st, 0) == 0 && (st.st_mode & 07777) == 02770);
    umask(old);
    close(dirfd);
    test_rmdtemp(base);
}

int main(void)
{
    test_fs_modes();
    test_private_modes();
    if (geteuid() != 0) {
        puts("test_perm: skip the multi-user part: needs root (setresuid to test uids)");
        return TEST_SKIP_CODE;
    }
    test_group_modes();
    test_private_dir();
    test_foreign();
    puts("test_perm: ok");
    return 0;
}

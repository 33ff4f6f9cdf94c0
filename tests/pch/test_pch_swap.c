/* Rule 4 for the PCH helper (docs/SECURITY.md, "Paths that are trusted"):
 * the helper is checked on the descriptor it is run from, so a file or a
 * link swapped in after the check never runs; a path through a directory
 * others can write, or a link at its name, is refused outright, however it
 * is raced. Each impostor is a script that leaves a marker file: the test
 * asserts the marker never appears, and that every compile still gives the
 * bytes of a compile without the tier. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "pch_fixtures.h"

static char marker[700], impostor[700];

static void copy_file(const char *from, const char *to, mode_t mode)
{
    size_t n;
    char *bytes = test_read_file(from, &n);
    CHECK(bytes != NULL);
    int fd = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    CHECK(fd >= 0);
    CHECK(write(fd, bytes, n) == (ssize_t)n);
    CHECK(fchmod(fd, mode) == 0);
    CHECK(close(fd) == 0);
    free(bytes);
}

static int marker_seen(void)
{
    return access(marker, F_OK) == 0;
}

/* The checked helper is the one that runs: its file is replaced by an
 * impostor after the handle opened it, and three compiles still make and
 * use a PCH (only the real helper can), with no marker. */
static void test_swapped_after_check(void)
{
    char dir[600], path[700], staged[700];
    snprintf(dir, sizeof dir, "%s/private", work);
    CHECK(mkdir(dir, 0755) == 0);
    snprintf(path, sizeof path, "%s/helper", dir);
    snprintf(staged, sizeof staged, "%s/impostor", dir);
    copy_file(helper, path, 0755);
    copy_file(impostor, staged, 0755);
    setenv("PROGCACHE_PCH_HELPER", path, 1);
    char *cache_dir;
    progcache *cache = open_cache(&cache_dir, "pchswap");
    compiled c = compile_v(cache, 300, 0, "h3", PROGCACHE_TARGET_CUBIN, NULL, NULL);
    free(c.bytes); /* the tier is open: the helper was checked and held */
    CHECK(rename(staged, path) == 0);
    /* Made and used (the first compile saw the prefix): the real helper
     * ran, the same bytes as without the tier. */
    for (int v = 301; v < 304; v++) {
        c = compile_v(cache, v, 0, "h3", PROGCACHE_TARGET_CUBIN, NULL, NULL);
        compiled p = plain_v(v, "h3", PROGCACHE_TARGET_CUBIN);
        CHECK(same(&c, &p));
        free(c.bytes);
        free(p.bytes);
    }
    progcache_stats st = stats_of(cache);
    CHECK(st.pch_created == 1 && st.pch_hits == 2);
    CHECK(!marker_seen());
    close_cache(cache, cache_dir);
    /* A new handle checks the new file: a script of root, mode 0755, is
     * trusted like any such file; it runs, and fails, cleanly. */
    without_helper(path, "gave no usable answer");
    CHECK(marker_seen());
    CHECK(unlink(marker) == 0);
    setenv("PROGCACHE_PCH_HELPER", helper, 1);
}

/* Swap path's link between the real helper and the impostor until killed. */
static pid_t swapper(const char *dir, const char *path)
{
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid != 0)
        return pid;
    char tmp[800];
    snprintf(tmp, sizeof tmp, "%s/.next", dir);
    for (unsigned long i = 0;; i++) {
        unlink(tmp);
        if (symlink(i % 2 ? impostor : helper, tmp) == 0)
            rename(tmp, path);
    }
}

static void stop(pid_t pid)
{
    kill(pid, SIGKILL);
    CHECK(waitpid(pid, NULL, 0) == pid);
}

/* A link at the helper's name in a directory anyone can write, swapped
 * in a loop while compiles run: refused, whatever it points to at the
 * moment; the compiles go on without the tier. */
static void test_writable_directory_raced(void)
{
    char dir[600], path[700];
    snprintf(dir, sizeof dir, "%s/open", work);
    CHECK(mkdir(dir, 0777) == 0 && chmod(dir, 0777) == 0);
    snprintf(path, sizeof path, "%s/helper", dir);
    CHECK(symlink(helper, path) == 0);
    pid_t pid = swapper(dir, path);
    for (int round = 0; round < 3; round++)
        without_helper(path, "is writable by other users (mode 0777)");
    stop(pid);
    CHECK(!marker_seen());

    /* A copy of the real helper there, not a link: still refused. */
    char copy[700];
    snprintf(copy, sizeof copy, "%s/real", dir);
    copy_file(helper, copy, 0755);
    without_helper(copy, "is writable by other users (mode 0777)");

    /* The writable directory higher up, a private one below it. */
    char below[700], deep[800];
    snprintf(below, sizeof below, "%s/sub", dir);
    CHECK(mkdir(below, 0755) == 0);
    snprintf(deep, sizeof deep, "%s/helper", below);
    copy_file(helper, deep, 0755);
    without_helper(deep, "is writable by other users (mode 0777)");
    CHECK(!marker_seen());
}

/* A link at the name, even in a private directory: refused (the name
 * must be the file); links above it, in trusted directories, are fine. */
static void test_links(void)
{
    char dir[600], path[700], up[700];
    snprintf(dir, sizeof dir, "%s/linked", work);
    CHECK(mkdir(dir, 0755) == 0);
    snprintf(path, sizeof path, "%s/helper", dir);
    CHECK(symlink(helper, path) == 0);
    without_helper(path, "is a symbolic link");

    /* <work>/via -> <work>/private (a directory with the real helper). */
    char real_dir[600], real[700];
    snprintf(real_dir, sizeof real_dir, "%s/real", work);
    CHECK(mkdir(real_dir, 0755) == 0);
    snprintf(real, sizeof real, "%s/helper", real_dir);
    copy_file(helper, real, 0755);
    snprintf(up, sizeof up, "%s/via", work);
    CHECK(symlink(real_dir, up) == 0);
    snprintf(path, sizeof path, "%s/via/helper", work);
    setenv("PROGCACHE_PCH_HELPER", path, 1);
    char *cache_dir;
    progcache *cache = open_cache(&cache_dir, "pchvia");
    warm(cache, 320, "h3");
    close_cache(cache, cache_dir);
    setenv("PROGCACHE_PCH_HELPER", helper, 1);

    /* A directory owned by another user on the path. */
    char theirs[600], their_helper[700];
    snprintf(theirs, sizeof theirs, "%s/theirs", work);
    CHECK(mkdir(theirs, 0755) == 0);
    snprintf(their_helper, sizeof their_helper, "%s/helper", theirs);
    copy_file(helper, their_helper, 0755);
    if (geteuid() == 0) {
        CHECK(chown(theirs, 65534, 65534) == 0);
        without_helper(their_helper, "is owned by uid 65534, neither root nor this user");
    }
    CHECK(!marker_seen());
}

int main(void)
{
    if (!pch_fixtures_setup("test_pch_swap"))
        return TEST_SKIP_CODE;
    snprintf(marker, sizeof marker, "%s/IMPOSTOR-RAN", work);
    snprintf(impostor, sizeof impostor, "%s/impostor.sh", work);
    char text[1600];
    snprintf(text, sizeof text, "#!/bin/sh\ntouch '%s'\nexit 1\n", marker);
    write_script(impostor, text);
    CHECK(chmod(impostor, 0755) == 0);
    test_swapped_after_check();
    test_writable_directory_raced();
    test_links();
    pch_fixtures_teardown();
    puts("test_pch_swap: ok");
    return 0;
}

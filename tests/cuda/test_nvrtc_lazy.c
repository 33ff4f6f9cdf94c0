/* NVRTC is loaded on first need (src/key/nvrtc_lib.c): a hit never maps
 * it, and the key's NVRTC version comes from the cache's record of the
 * library (src/cuda/nvrtc_record.c), bound to its path, size, change
 * time and build ID, or from PROGCACHE_NVRTC_VERSION. Each step runs in a fresh process
 * (this program, run again with a mode), since a library once loaded stays
 * for the life of the process; /proc/self/maps says whether it is mapped. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda_fixtures.h"
#include "key/nvrtc_lib.h"

static int nvrtc_mapped(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4096];
    int found = 0;
    while (f && fgets(line, sizeof line, f))
        found |= strstr(line, "libnvrtc") != NULL;
    if (f)
        fclose(f);
    return found;
}

/* The child's side: one compile-or-load of the fixture in dir; exit 0
 * when the status is want and NVRTC's mapping is mapped. */
static int child(const char *dir, const char *want, int mapped)
{
    progcache *cache = NULL;
    if (progcache_open(&cache, dir, NULL)) {
        fprintf(stderr, "open: %s\n", progcache_error_last());
        return 20;
    }
    progcache_program p = fixture_program(PROGCACHE_PROGRAM_NO_LOAD);
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    int rc = progcache_compile_or_load(&r, cache, &p);
    int status = 0;
    if (!strcmp(want, "refused") || !strcmp(want, "invalid")) {
        int code = !strcmp(want, "refused") ? PROGCACHE_ECOMPILE : PROGCACHE_EINVAL;
        if (rc != code || !strstr(progcache_error_last(), "PROGCACHE_NVRTC_VERSION")) {
            fprintf(stderr, "wanted %s, got %d: %s\n", want, rc, progcache_error_last());
            status = 21;
        }
    } else if (rc || strcmp(progcache_status_name(r.status), want)) {
        fprintf(stderr, "wanted %s, got rc %d status %s: %s\n", want, rc,
                progcache_status_name(r.status), rc ? progcache_error_last() : "");
        status = 22;
    }
    int absent = mapped == 2; /* no NVRTC at all */
    if (absent)
        mapped = 0;
    if (!status && nvrtc_mapped() != mapped) {
        fprintf(stderr, "NVRTC is %smapped after a %s\n", mapped ? "not " : "", want);
        status = 23;
    }
    /* Key derivation elsewhere (the public call) agrees without loading. */
    int major = 0, minor = 0;
    if (!status && !rc && !mapped && !absent &&
        (progcache_nvrtc_version(&major, &minor) || major < 12 || nvrtc_mapped())) {
        fprintf(stderr, "progcache_nvrtc_version loaded NVRTC or failed\n");
        status = 24;
    }
    /* Without NVRTC and without a cache, the public call cannot know: it
     * says so, naming NVRTC and the setting. */
    if (!status && absent &&
        (progcache_nvrtc_version(&major, &minor) != PROGCACHE_ENOCUDA ||
         !strstr(progcache_error_last(), "no NVRTC") ||
         !strstr(progcache_error_last(), "PROGCACHE_NVRTC_VERSION"))) {
        fprintf(stderr, "progcache_nvrtc_version without NVRTC: %s\n", progcache_error_last());
        status = 25;
    }
    progcache_program_result_release(&r);
    progcache_close(cache);
    return status;
}

/* Run this program in mode want (its exit status), with env ("NAME=value"
 * or NULL) added to the environment. */
static int run(const char *dir, const char *want, int mapped, const char *env)
{
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        if (env)
            putenv((char *)env);
        char m[2] = {(char)('0' + mapped), 0}; /* 2: no NVRTC at all */
        execl("/proc/self/exe", "test_nvrtc_lazy", dir, want, m, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* The cache's count of hits that loaded NVRTC only for the key. */
static uint64_t key_loads(const char *dir)
{
    progcache *cache = NULL;
    CHECK_OK(progcache_open(&cache, dir, NULL));
    progcache_stats st = PROGCACHE_STATS_INIT;
    CHECK_OK(progcache_stats_get(&st, cache));
    progcache_close(cache);
    return st.nvrtc_key_loads;
}

static int count_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    int n = 0, c;
    while (f && (c = fgetc(f)) != EOF)
        n += c == '\n';
    if (f)
        fclose(f);
    return n;
}

/* A copy of the NVRTC this build loads, for PROGCACHE_NVRTC_LIBRARY: a
 * file whose change time the test may move. */
static int copy_nvrtc(const char *to)
{
    const progcache__nvrtc_api *api;
    progcache__nvrtc_file from;
    if (progcache__nvrtc_load(&api) || progcache__nvrtc_loaded_file(&from))
        return -1;
    int in = open(from.path, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0755);
    char buf[1 << 16];
    ssize_t n;
    int ok = in >= 0 && out >= 0;
    while (ok && (n = read(in, buf, sizeof buf)) > 0)
        ok = write(out, buf, (size_t)n) == n;
    if (in >= 0)
        close(in);
    if (out >= 0 && close(out) != 0)
        ok = 0;
    return ok ? 0 : -1;
}

/* Rewrite the record's lines for path: legacy drops the build ID field
 * (the format before it), else its first digit changes (another build
 * with the same path, size and change time). */
static void edit_record(const char *record, const char *path, int legacy)
{
    static char in[1 << 16], out[1 << 16];
    FILE *f = fopen(record, "r");
    CHECK(f != NULL);
    size_t n = fread(in, 1, sizeof in - 1, f), len = 0, edited = 0;
    fclose(f);
    in[n] = '\0';
    for (char *line = in, *nl; (nl = strchr(line, '\n')); line = nl + 1) {
        *nl = '\0';
        char *id = line;
        for (int i = 0; i < 3 && id; i++)
            id = strchr(id + (i > 0), ' ');
        char *after = id ? strchr(id + 1, ' ') : NULL;
        if (after && !edited && !strcmp(after + 1, path)) { /* the newest line */
            edited++;
            if (legacy)
                memmove(id, after, strlen(after) + 1);
            else
                id[1] = id[1] == '0' ? '1' : '0';
        }
        len += (size_t)snprintf(out + len, sizeof out - len, "%s\n", line);
        CHECK(len < sizeof out);
    }
    CHECK(edited == 1);
    f = fopen(record, "w");
    CHECK(f != NULL && fwrite(out, 1, len, f) == len && fclose(f) == 0);
}

int main(int argc, char **argv)
{
    if (argc == 4)
        return child(argv[1], argv[2], argv[3][0] - '0');

    char *dir = test_mkdtemp("nvrtclazy");
    char record[4200];
    snprintf(record, sizeof record, "%s/progcache/nvrtc-%u", dir, (unsigned)geteuid());

    /* A miss compiles (NVRTC mapped) and leaves the record; a hit in a
     * fresh process does not map NVRTC. */
    CHECK(run(dir, "MISS", 1, NULL) == 0);
    CHECK(count_lines(record) == 1);
    CHECK(run(dir, "HIT", 0, NULL) == 0);
    CHECK(run(dir, "HIT", 0, NULL) == 0);
    CHECK(key_loads(dir) == 0);

    /* Without the record, the hit loads NVRTC to learn its version (never
     * a guess), and writes the record again. */
    CHECK(unlink(record) == 0);
    CHECK(run(dir, "HIT", 1, NULL) == 0);
    CHECK(count_lines(record) == 1);
    CHECK(key_loads(dir) == 1); /* counted: a hit that paid NVRTC's load */
    CHECK(run(dir, "HIT", 0, NULL) == 0);
    CHECK(key_loads(dir) == 1);

    /* A record that is not this user's file, or is writable by all, is not
     * read: NVRTC is loaded instead. */
    CHECK(chmod(record, 0666) == 0);
    CHECK(run(dir, "HIT", 1, NULL) == 0);
    CHECK(chmod(record, 0644) == 0);

    /* The version explicitly: no record needed. */
    const progcache__nvrtc_api *api;
    CHECK_OK(progcache__nvrtc_load(&api));
    char right[64], wrong[64];
    snprintf(right, sizeof right, "PROGCACHE_NVRTC_VERSION=%d.%d", api->major, api->minor);
    snprintf(wrong, sizeof wrong, "PROGCACHE_NVRTC_VERSION=%d.%d", api->major, api->minor + 7);
    CHECK(unlink(record) == 0);
    CHECK(run(dir, "HIT", 0, right) == 0);
    CHECK(run(dir, "HIT", 1, NULL) == 0); /* records it again */

    /* A version that is not the NVRTC's: the lookup misses and the compile
     * is refused rather than stored under the other version's key. */
    CHECK(run(dir, "refused", 1, wrong) == 0);
    CHECK(run(dir, "invalid", 0, "PROGCACHE_NVRTC_VERSION=thirteen") == 0);

    /* Another NVRTC file (PROGCACHE_NVRTC_LIBRARY): a record of its own.
     * Its change time moves (a reinstall, an update in place): the old
     * line no longer applies, NVRTC is loaded and a line added. */
    char *lib = test_mkdtemp("nvrtclib");
    char copy[4200], env[4300];
    snprintf(copy, sizeof copy, "%s/libnvrtc-copy.so", lib);
    CHECK(copy_nvrtc(copy) == 0);
    snprintf(env, sizeof env, "PROGCACHE_NVRTC_LIBRARY=%s", copy);
    CHECK(run(dir, "HIT", 1, env) == 0);
    CHECK(count_lines(record) == 2);
    CHECK(run(dir, "HIT", 0, env) == 0);
    CHECK(chmod(copy, 0700) == 0); /* the change time moves */
    CHECK(run(dir, "HIT", 1, env) == 0);
    CHECK(count_lines(record) == 3);
    CHECK(run(dir, "HIT", 0, env) == 0);

    /* The same path, size and change time with another build ID (another
     * node's NVRTC sharing the directory): not that file's record, so NVRTC
     * is loaded and its own line added. */
    char real[4200];
    CHECK(realpath(copy, real) != NULL);
    edit_record(record, real, 0);
    CHECK(run(dir, "HIT", 1, env) == 0);
    CHECK(count_lines(record) == 4);
    CHECK(run(dir, "HIT", 0, env) == 0);
    /* A line of the format before build IDs names no file as it is now:
     * NVRTC is loaded once more and today's line written. */
    CHECK(chmod(copy, 0755) == 0); /* the change time moves: a fresh line */
    CHECK(run(dir, "HIT", 1, env) == 0);
    CHECK(count_lines(record) == 5);
    edit_record(record, real, 1);
    CHECK(run(dir, "HIT", 1, env) == 0);
    CHECK(count_lines(record) == 6);
    CHECK(run(dir, "HIT", 0, env) == 0);
    CHECK(unlink(copy) == 0);

    /* NVRTC gone (the setting names a file that is not there, and no other
     * NVRTC is taken in its place): the records' one version, in all three
     * lines, is the key's, and the hit needs no NVRTC. */
    CHECK(run(dir, "HIT", 2, env) == 0);
    test_rmdtemp(lib);
    test_rmdtemp(dir);
    return 0;
}

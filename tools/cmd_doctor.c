/* progcache doctor: what a program would use here, and whether it is well
 * (docs/OPERATIONS.md, "Doctor"). Looks only: the directory is opened
 * read-only, so nothing is fixed behind the user's back. */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "progcache/cuda.h"
#include "progcache/remote.h"
#include "tool.h"

#define CMD "doctor"

static const char usage_text[] =
    "usage: progcache doctor [-d DIR] [--json]\n"
    "\n"
    "Check what a program would use on this machine and say, one line each, what\n"
    "is well (ok), worth knowing (note) or wrong (FAIL, with the fix): the NVRTC\n"
    "that would compile (its file and version, and a test compile) and the CUDA\n"
    "driver (none on a machine without a GPU: a note); the cache directory (owner,\n"
    "group, modes, free space against the cap, how entries are sealed, how\n"
    "compiles wait for each other, damaged entries and files that are not the\n"
    "cache's); every setting in force and where it comes from (the environment,\n"
    "the settings file, the default); the remote tier, when one is configured,\n"
    "reached as 'progcache remote' does. Nothing is changed.\n"
    "\n"
    "options:\n"
    "  -d, --dir DIR  the cache directory (default: $PROGCACHE_DIR, else cuda.core's)\n"
    "  --json         print one JSON object: {\"schema\", \"dir\", \"checks\": [{\"status\",\n"
    "                 \"what\", \"message\", \"fix\"}], \"ok\"} (fix: null but on a FAIL\n"
    "                 that names one)\n"
    "  -h, --help     this text\n"
    "\n"
    "Exit status: 0 all is well (notes allowed); 1 at least one FAIL; 2 bad usage.\n";

typedef struct doctor {
    int failed;
    int json;   /* --json: each finding an object of "checks" */
    int checks; /* findings said so far */
} doctor;

/* One finding as an object of the "checks" array: the fix is what follows
 * "fix: " in the message, as the text's lines write it. */
static void say_json(doctor *d, const char *status, const char *what, const char *message)
{
    const char *fix = strstr(message, "fix: ");
    size_t len = fix ? (size_t)(fix - message) : strlen(message);
    while (len && (message[len - 1] == ' ' || message[len - 1] == ';' ||
                   message[len - 1] == ','))
        len--;
    char *text = strndup(message, len);
    printf("%s\n    {\"status\": ", d->checks ? "," : "");
    tool_json_string(stdout, status);
    printf(", \"what\": ");
    tool_json_string(stdout, what);
    printf(", \"message\": ");
    tool_json_string(stdout, text ? text : message);
    printf(", \"fix\": ");
    if (fix)
        tool_json_string(stdout, fix + 5);
    else
        printf("null");
    putchar('}');
    free(text);
}

static void say(doctor *d, const char *status, const char *what, const char *fmt, ...)
    TOOL_PRINTF(4, 5);

static void say(doctor *d, const char *status, const char *what, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (d->json) {
        char message[4096];
        vsnprintf(message, sizeof message, fmt, ap);
        say_json(d, status, what, message);
    } else {
        printf("%-5s %-14s ", status, what);
        vprintf(fmt, ap);
        putchar('\n');
    }
    va_end(ap);
    d->checks++;
    if (!strcmp(status, "FAIL"))
        d->failed = 1;
}

/* The file this process mapped whose name contains soname ("/libnvrtc.so"),
 * from /proc/self/maps: the library the loader really opened. */
static int mapped(char *out, size_t len, const char *soname)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4352];
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f)) {
        char *path = strchr(line, '/');
        if (path && strstr(path, soname)) {
            path[strcspn(path, "\n")] = '\0';
            snprintf(out, len, "%s", path);
            found = 1;
        }
    }
    if (f)
        fclose(f);
    return found;
}

/* ---- NVRTC and the driver ------------------------------------------------- */

static void check_nvrtc(doctor *d, const progcache_settings *set)
{
    const progcache_setting *lib = set ? progcache_settings_find(set, "nvrtc_library") : NULL;
    const char *from = lib && lib->value[0] ? " (from PROGCACHE_NVRTC_LIBRARY)" : "";
    progcache_key_nvrtc_options prog = PROGCACHE_KEY_NVRTC_OPTIONS_INIT;
    prog.source = "extern \"C\" __global__ void progcache_doctor(int *p) { *p = 1; }\n";
    prog.target = PROGCACHE_TARGET_PTX;
    prog.name = "progcache_doctor.cu";
    progcache_buf ptx = PROGCACHE_BUF_INIT;
    int rc = progcache_nvrtc_compile(&ptx, NULL, NULL, &prog);
    progcache_buf_free(&ptx);
    if (rc == PROGCACHE_ENOCUDA) {
        say(d, "FAIL", "nvrtc", "%s; fix: install NVRTC (cuda-nvrtc-13-0) or set "
                                "PROGCACHE_NVRTC_LIBRARY to its file", progcache_error_last());
        return;
    }
    char path[4096] = "?";
    mapped(path, sizeof path, "/libnvrtc.so");
    int major = 0, minor = 0;
    if (rc || progcache_nvrtc_version(&major, &minor)) {
        say(d, "FAIL", "nvrtc", "%s%s loads but a test compile fails: %s; fix: reinstall it",
            path, from, progcache_error_last());
        return;
    }
    say(d, "ok", "nvrtc", "%s%s, NVRTC %d.%d (a test compile to PTX works)", path, from, major,
        minor);
}

static void check_driver(doctor *d)
{
    const progcache_cuda_api *api = NULL;
    int rc = progcache_cuda_load(&api);
    if (rc == PROGCACHE_ENOCUDA) {
        /* Not a failure: compiles, keys and hits need no driver; only
         * loading a module does (docs/CUDA.md). */
        say(d, "note", "driver", "%s: compiles and cache hits work here, loading a module "
                                 "needs a GPU", progcache_error_last());
        return;
    }
    if (rc) {
        say(d, "FAIL", "driver", "%s; fix: check the NVIDIA driver (nvidia-smi)",
            progcache_error_last());
        return;
    }
    char path[4096] = "libcuda.so.1";
    mapped(path, sizeof path, "/libcuda.so");
    say(d, "ok", "driver", "%s, CUDA %d.%d driver", path, api->driver_version / 1000,
        api->driver_version % 1000 / 10);
}

/* ---- the directory ----------------------------------------------------------- */

static void user_of(char *out, size_t len, uid_t uid)
{
    struct passwd *pw = getpwuid(uid);
    if (pw)
        snprintf(out, len, "%s", pw->pw_name);
    else
        snprintf(out, len, "uid %u", (unsigned)uid);
}

static void group_of(char *out, size_t len, gid_t gid)
{
    struct group *gr = getgrgid(gid);
    if (gr)
        snprintf(out, len, "%s", gr->gr_name);
    else
        snprintf(out, len, "gid %u", (unsigned)gid);
}

static int member_of(gid_t gid)
{
    gid_t list[4096];
    int n = getgroups((int)(sizeof list / sizeof list[0]), list);
    if (getegid() == gid)
        return 1;
    for (int i = 0; i < n; i++)
        if (list[i] == gid)
            return 1;
    return 0;
}

/* A directory's mode as docs/SHARED.md wants it: a group cache (set-group-ID)
 * 2770 of its group, a private one 0700; never writable by every user. */
static void check_mode(doctor *d, const char *path, const struct stat *st)
{
    unsigned m = (unsigned)(st->st_mode & 07777);
    if (m & S_IWOTH)
        say(d, "FAIL", "modes", "%s is %04o: every user can write into it; fix: chmod o-rwx %s",
            path, m, path);
    else if ((m & S_ISGID) && (m & 02770) != 02770)
        say(d, "FAIL", "modes", "%s is %04o, a group cache whose members cannot all use it; "
                                "fix: chmod 2770 %s", path, m, path);
    else if (!(m & S_ISGID) && (m & 077))
        say(d, "FAIL", "modes", "%s is %04o: other users can look into a private cache; "
                                "fix: chmod 700 %s (or make it a team cache: docs/SHARED.md)",
            path, m, path);
    else
        say(d, "ok", "modes", "%s is %04o (%s)", path, m,
            (m & S_ISGID) ? "a group cache" : "private");
}

/* 1 when the directory is there and worth opening. */
static int check_owner(doctor *d, const char *dir, struct stat *st)
{
    if (stat(dir, st) != 0) {
        if (errno == ENOENT) {
            say(d, "ok", "directory", "%s does not exist yet: the first program to use it "
                                      "makes it", dir);
            return 0;
        }
        say(d, "FAIL", "directory", "%s cannot be reached: %s; fix: check the path and its "
                                    "parents' permissions", dir, strerror(errno));
        return 0;
    }
    if (!S_ISDIR(st->st_mode)) {
        say(d, "FAIL", "directory", "%s is not a directory; fix: set PROGCACHE_DIR (or -d) to "
                                    "a directory", dir);
        return 0;
    }
    char user[128], group[128];
    user_of(user, sizeof user, st->st_uid);
    group_of(group, sizeof group, st->st_gid);
    int group_cache = (st->st_mode & S_ISGID) && member_of(st->st_gid);
    if (st->st_uid == geteuid())
        say(d, "ok", "owner", "%s, group %s (this user's)", user, group);
    else if (group_cache)
        say(d, "ok", "owner", "%s, group %s (a team cache of a group this user is in)", user,
            group);
    else
        say(d, "FAIL", "owner", "%s, group %s: another user's cache, which this user's "
                                "programs read but never store into; fix: use a directory of "
                                "your own (PROGCACHE_DIR) or ask %s to make it a team cache "
                                "(docs/SHARED.md)", user, group, user);
    check_mode(d, dir, st);
    char sub[4200];
    struct stat sst;
    static const char *const subs[] = {"entries", "progcache"};
    for (size_t i = 0; i < 2; i++) {
        snprintf(sub, sizeof sub, "%s/%s", dir, subs[i]);
        if (lstat(sub, &sst) == 0 && S_ISDIR(sst.st_mode) &&
            ((sst.st_mode & S_IWOTH) || (!(st->st_mode & S_ISGID) && (sst.st_mode & 077))))
            check_mode(d, sub, &sst);
    }
    return 1;
}

static void check_space(doctor *d, const char *dir, const progcache_stats *s)
{
    struct statvfs vfs;
    char a[64], b[64], c[64];
    if (statvfs(dir, &vfs) != 0) {
        say(d, "FAIL", "free space", "statvfs %s: %s", dir, strerror(errno));
        return;
    }
    uint64_t free_bytes = (uint64_t)vfs.f_bavail * vfs.f_frsize;
    tool_format_size_long(a, sizeof a, free_bytes);
    tool_format_size_long(b, sizeof b, s->total_size);
    tool_format_size_long(c, sizeof c, s->max_size);
    if (s->max_size && free_bytes + s->total_size < s->max_size)
        say(d, "FAIL", "free space", "%s free, %s used: the cap of %s cannot be reached, and "
                                     "puts will fail on a full disk first; fix: lower the cap "
                                     "(progcache config max_size SIZE) or free space",
            a, b, c);
    else
        say(d, "ok", "free space", "%s free, %s used of a cap of %s", a, b,
            s->max_size ? c : "none");
}

static void check_store(doctor *d, progcache_file *file)
{
    progcache_stats s = PROGCACHE_STATS_INIT;
    const char *seal = progcache_file_seal_mechanism(file);
    say(d, "ok", "seals", "%s", !strcmp(seal, "xattr")
                                     ? "xattr (an extended attribute on each entry)"
                                     : "sidecar files in progcache/seals/ (the file system has "
                                       "no user extended attributes)");
    if (progcache_store_stats_get(&s, progcache_file_store(file)) != PROGCACHE_OK)
        say(d, "FAIL", "statistics", "cannot be read: %s", progcache_error_last());
    const char *lock = progcache_file_flight_mechanism(file);
    const char *kind = !strcmp(lock, "lease") ? "lease files in progcache/flight.d/"
                                              : "byte-range locks on progcache/flight";
    if (s.lock_failures)
        say(d, "FAIL", "locks", "%s; the file system refused %llu lock calls (NFS without a "
                                "lock manager?); fix: PROGCACHE_FLIGHT_LOCK=lease",
            kind, (unsigned long long)s.lock_failures);
    else
        say(d, "ok", "locks", "%s", kind);
    check_space(d, progcache_file_path(file), &s);
    progcache_verify_result v = PROGCACHE_VERIFY_RESULT_INIT;
    if (progcache_file_verify(&v, file, NULL) != PROGCACHE_OK) {
        say(d, "FAIL", "entries", "cannot be checked: %s", progcache_error_last());
        return;
    }
    if (v.bad)
        say(d, "FAIL", "entries", "%llu of %llu damaged; fix: progcache verify --fix",
            (unsigned long long)v.bad, (unsigned long long)v.checked);
    else
        say(d, "ok", "entries", "%llu checked, none damaged%s", (unsigned long long)v.checked,
            v.unknown ? " (some of no known kind: progcache verify lists them)" : "");
    if (v.foreign)
        say(d, "FAIL", "foreign files", "%llu file%s that are not the cache's (left alone); "
                                        "fix: move them out (progcache verify names them)",
            (unsigned long long)v.foreign, v.foreign == 1 ? "" : "s");
}

/* ---- settings and the remote tier ---------------------------------------------- */

static void check_settings(doctor *d, const progcache_settings *set)
{
    static const char *const from[] = {"default", "settings file", "environment", "options"};
    for (size_t i = 0; i < progcache_settings_count(set); i++) {
        const progcache_setting *it = progcache_settings_at(set, i);
        const char *bad = tool_setting_ignored(it);
        if (bad) {
            say(d, "FAIL", "settings", "%s=\"%.64s\" cannot be used: ignored, %s stays %s; "
                "fix: correct or unset %s ('progcache config --help')", it->variable, bad,
                it->name, it->value, it->variable);
            continue;
        }
        const char *where = it->source == PROGCACHE_SETTING_DEFAULT ? "" : it->origin;
        int on = it->number && (!strcmp(it->name, "disable") || !strcmp(it->name, "readonly") ||
                                !strcmp(it->name, "recache"));
        say(d, on ? "note" : "ok", "setting", "%s = %s (%s%s%s)%s", it->name,
            it->value[0] ? it->value : "-", from[it->source & 3], where[0] ? ": " : "", where,
            on ? ": a switch of ccache's is on (docs/OPERATIONS.md)" : "");
    }
}

static void check_remote(doctor *d, const progcache_settings *set)
{
    const progcache_setting *url = progcache_settings_find(set, "remote");
    if (!url || !url->value[0]) {
        say(d, "ok", "remote", "none configured (PROGCACHE_REMOTE is not set)");
        return;
    }
    progcache_store *store = NULL;
    const char *source;
    if (tool_remote_open(CMD, NULL, NULL, NULL, &store, &source) != EXIT_OK) {
        say(d, "FAIL", "remote", "%s cannot be used (above); fix: PROGCACHE_REMOTE and "
                                 "PROGCACHE_REMOTE_SECRET_FILE (docs/REMOTE.md)", url->value);
        return;
    }
    progcache_redis_status st = PROGCACHE_REDIS_STATUS_INIT;
    int rc = progcache_redis_status_get(&st, store, 3);
    if (!st.reachable || rc)
        say(d, "FAIL", "remote", "%s unreachable: %s; every remote lookup is a miss until it "
                                 "answers; fix: start the server or correct PROGCACHE_REMOTE",
            st.where[0] ? st.where : url->value,
            st.error[0] ? st.error : progcache_error_last());
    else if (!st.policy_ok && st.maxmemory_policy[0])
        say(d, "FAIL", "remote", "%s reachable, but its maxmemory-policy is %s; fix: CONFIG "
                                 "SET maxmemory-policy allkeys-lru (docs/REMOTE.md)",
            st.where, st.maxmemory_policy);
    else
        say(d, "ok", "remote", "%s reachable (%.3f ms, server auth %s, entry secret %s)",
            st.where, st.ping_median_ms, st.auth ? "on" : "off", st.secret ? "on" : "off");
    progcache_store_free(store);
}

int cmd_doctor(int argc, char **argv)
{
    static const tool_option options[] = {{NULL, 0, 0}};
    tool_parser p;
    tool_parser_init(&p, CMD, usage_text, argc, argv, options, TOOL_JSON);
    for (int c; (c = tool_next(&p)) != TOOL_END;) {
        if (c == TOOL_EXIT)
            return p.code;
        return tool_unexpected_arg(CMD, p.arg);
    }
    doctor d = {0, p.json, 0};
    char *dir = NULL;
    int code = tool_resolve_dir(CMD, p.dir, &dir);
    if (code)
        return code;
    if (d.json) {
        tool_json_begin(stdout);
        printf(", \"dir\": ");
        tool_json_string(stdout, dir);
        printf(", \"checks\": [");
    }
    progcache_settings *set = NULL;
    if (progcache_settings_load(&set, dir) != PROGCACHE_OK) {
        say(&d, "FAIL", "settings", "%s; fix: correct what it names", progcache_error_last());
        set = NULL; /* the rest says what it can without them */
    }
    check_nvrtc(&d, set);
    check_driver(&d);
    /* Where the directory comes from, in progcache_default_dir's order. */
    const char *env_dir = getenv("PROGCACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME");
    say(&d, "ok", "directory", "%s (%s)", dir,
        p.dir                   ? "--dir"
        : env_dir && *env_dir   ? "$PROGCACHE_DIR"
        : xdg && *xdg           ? "cuda.core's default under $XDG_CACHE_HOME"
                                : "cuda.core's default under $HOME");
    struct stat st;
    if (check_owner(&d, dir, &st)) {
        progcache_file *file = NULL;
        if (tool_open_file(CMD, dir, TOOL_READ, 0, &file) != EXIT_OK)
            say(&d, "FAIL", "open", "%s cannot be opened (above)", dir);
        else
            check_store(&d, file);
        progcache_file_close(file);
    }
    if (set) {
        check_settings(&d, set);
        check_remote(&d, set);
    }
    progcache_settings_free(set);
    free(dir);
    if (d.json)
        printf("%s], \"ok\": %s}\n", d.checks ? "\n  " : "", d.failed ? "false" : "true");
    else
        printf("%s\n", d.failed ? "something is wrong: see the FAIL lines" : "all is well");
    return d.failed ? EXIT_NO : EXIT_OK;
}

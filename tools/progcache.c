/* progcache: the admin tool. Dispatches to one file per subcommand; the
 * helpers they share (argument parsing, opening the cache directory,
 * formatting) live here too. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "progcache/remote.h"
#include "progcache/sys/store.h"
#include "tool.h"

static const struct {
    const char *name;
    tool_command_fn fn;
    const char *summary;
} commands[] = {
    {"stats", cmd_stats, "show the cache's statistics (hits, misses, size, ...)"},
    {"ls", cmd_ls, "list entries: size, last use, kind, architecture, kernels"},
    {"verify", cmd_verify, "check every entry; --fix removes bad ones"},
    {"prune", cmd_prune, "remove least recently used entries by size or age"},
    {"clear", cmd_clear, "remove every entry"},
    {"get", cmd_get, "write the artifact stored under a key"},
    {"put", cmd_put, "store a file under a key"},
    {"export", cmd_export, "write the cache to a tar archive"},
    {"import", cmd_import, "add the entries of a tar archive to the cache"},
    {"warm", cmd_warm, "compile the programs of a manifest into the cache"},
    {"key", cmd_key, "print the cache key of an NVRTC compile"},
    {"explain", cmd_explain, "say why a compile misses: which inputs differ from stored ones"},
    {"remote", cmd_remote, "check the remote tier: reachable, latency, entries, leases"},
    {"exec", cmd_exec, "run a command with its NVRTC compiles through the cache"},
    {"config", cmd_config, "show or change the cache directory's settings (max_size, ...)"},
    {"doctor", cmd_doctor, "check NVRTC, the driver, the directory, settings, remote tier"},
};
#define NUM_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *out)
{
    fprintf(out, "usage: progcache [-d DIR] [-q] <command> [options] [arguments]\n\n"
                 "Persistent cache of CUDA programs compiled at run time "
                 "(cuda.core-compatible).\n\n"
                 "commands:\n");
    for (size_t i = 0; i < NUM_COMMANDS; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\nRun 'progcache help <command>' (or 'progcache <command> --help') for its\n"
                 "options.\n\n"
                 "options (before or after the command):\n"
                 "  -d, --dir DIR  the cache directory (default: $PROGCACHE_DIR, else cuda.core's\n"
                 "                 $XDG_CACHE_HOME/cuda-python/program-cache or\n"
                 "                 ~/.cache/cuda-python/program-cache)\n"
                 "  -q, --quiet    no progress bar on standard error\n"
                 "  --shared-group GROUP\n"
                 "                 a team's cache: trust and write for the members of GROUP\n"
                 "                 (as $PROGCACHE_SHARED_GROUP; docs/SHARED.md)\n"
                 "  -h, --help     this text\n"
                 "  -V, --version  print the version\n\n"
                 "Exit status: 0 success; 1 looked and the answer is no (a miss, bad entries,\n"
                 "programs that did not compile); 2 bad usage; 3 could not do it (the cache, a\n"
                 "file, a setting or standard output could not be used).\n");
}

/* "progcache <cmd>: <message>" on stderr; returns exit_code. */
static int report(const char *cmd, int exit_code, const char *fmt, va_list ap)
{
    fprintf(stderr, "progcache %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    return exit_code;
}

int tool_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int code = report(cmd, EXIT_USAGE, fmt, ap);
    va_end(ap);
    return code;
}

int tool_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int code = report(cmd, EXIT_FAILED, fmt, ap);
    va_end(ap);
    return code;
}

int tool_lib_error(const char *cmd, int exit_code, const char *what)
{
    fprintf(stderr, "progcache %s: %s: %s\n", cmd, what, progcache_error_last());
    return exit_code;
}

/* ---- arguments -------------------------------------------------------------- */

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

unsigned char *tool_decode_hex(const char *text, size_t *len)
{
    size_t n = strlen(text);
    if (n == 0 || n % 2)
        return NULL;
    unsigned char *bytes = malloc(n / 2);
    if (!bytes)
        return NULL;
    for (size_t i = 0; i < n / 2; i++) {
        int hi = hex_value(text[2 * i]), lo = hex_value(text[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            free(bytes);
            return NULL;
        }
        bytes[i] = (unsigned char)(hi << 4 | lo);
    }
    *len = n / 2;
    return bytes;
}

int tool_key_arg(const char *cmd, const char *key_hex, unsigned char **key, size_t *len)
{
    if ((*key = tool_decode_hex(key_hex, len)))
        return EXIT_OK;
    return tool_usage_error(cmd,
                            "KEYHEX \"%s\" is not hex: give an even number of hex digits, such "
                            "as the 64 'progcache key' prints",
                            key_hex);
}

/* ---- the cache directory --------------------------------------------------- */

int tool_resolve_dir(const char *cmd, const char *dir, char **out)
{
    if (dir) {
        if (!*dir)
            return tool_usage_error(cmd, "--dir is empty: give a cache directory");
        *out = strdup(dir);
    } else {
        progcache_buf buf = PROGCACHE_BUF_INIT;
        /* The library's message says what to set; the tool's, once, what
         * to give ("no cache directory: no cache directory: ..." before). */
        if (progcache_default_dir(&buf) != PROGCACHE_OK)
            return tool_usage_error(cmd, "no cache directory: give --dir DIR, or set "
                                         "PROGCACHE_DIR (or XDG_CACHE_HOME or HOME)");
        *out = strdup((const char *)buf.data);
        progcache_buf_free(&buf);
    }
    return *out ? EXIT_OK : tool_error(cmd, "out of memory");
}

static int check_exists(const char *cmd, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return tool_error(cmd, "no cache directory at %s: %s", path, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return tool_error(cmd, "%s is not a directory; --dir must name a cache directory", path);
    return EXIT_OK;
}

static unsigned int flags_for(tool_access access)
{
    /* A directory only cuda.core wrote to is counted once, not at each
     * `stats` (issue 32): the count is kept where the user may write. */
    return access == TOOL_READ ? PROGCACHE_FILE_READONLY | PROGCACHE_FILE_KEEP_COUNTS : 0;
}

/* What the library tells a subcommand (the remote tier failing, a wait for
 * another compile): one line each on stderr, "progcache <cmd>: [warning: ]
 * <message>". Debug lines (repeats of a failure) are left out. */
static int fold_evictions;
static uint64_t folded[2]; /* entries, bytes */

void tool_fold_evictions(void) { fold_evictions = 1; }

void tool_folded_evictions(uint64_t *entries, uint64_t *bytes)
{
    *entries = __atomic_load_n(&folded[0], __ATOMIC_RELAXED);
    *bytes = __atomic_load_n(&folded[1], __ATOMIC_RELAXED);
}

static void tool_log(void *ctx, int level, const char *message)
{
    if (level < PROGCACHE_LOG_INFO)
        return;
    unsigned long long n, bytes;
    if (fold_evictions && level == PROGCACHE_LOG_INFO &&
        sscanf(message, "evicted %llu entries (%llu bytes)", &n, &bytes) == 2) {
        __atomic_add_fetch(&folded[0], (uint64_t)n, __ATOMIC_RELAXED);
        __atomic_add_fetch(&folded[1], (uint64_t)bytes, __ATOMIC_RELAXED);
        return;
    }
    if (!strncmp(message, "progcache: ", 11))
        message += 11;
    fprintf(stderr, "progcache %s: %s%s\n", (const char *)ctx,
            level >= PROGCACHE_LOG_WARN ? "warning: " : "", message);
}

int tool_open_file(const char *cmd, const char *path, tool_access access, uint64_t max,
                    progcache_file **out)
{
    int code = access == TOOL_CREATE ? EXIT_OK : check_exists(cmd, path);
    if (code)
        return code;
    progcache_file_options opts = PROGCACHE_FILE_OPTIONS_INIT;
    opts.flags = flags_for(access);
    opts.max_artifact_size = max;
    /* What the store says of the directory (a link refused where it keeps
     * a directory: docs/SECURITY.md) reaches the user of clear, prune,
     * verify and import as it reaches a program's. */
    opts.log = tool_log;
    opts.log_ctx = (void *)cmd;
    if (progcache_file_open(out, path, &opts) != PROGCACHE_OK)
        return tool_lib_error(cmd, EXIT_FAILED, "cannot open the cache");
    return EXIT_OK;
}

int tool_open_cache(const char *cmd, const char *path, tool_access access, uint64_t max,
                    progcache **out)
{
    int code = access == TOOL_CREATE ? EXIT_OK : check_exists(cmd, path);
    if (code)
        return code;
    progcache_options opts = PROGCACHE_OPTIONS_INIT;
    opts.flags = flags_for(access);
    opts.max_artifact_size = max;
    opts.log = tool_log;
    opts.log_ctx = (void *)cmd;
    if (progcache_open(out, path, &opts) != PROGCACHE_OK)
        return tool_lib_error(cmd, EXIT_FAILED, "cannot open the cache");
    return EXIT_OK;
}

int tool_open_remote(const char *cmd, const char *url, uint64_t max, progcache_store **out)
{
    char where[1024];
    tool_mask_url(where, sizeof where, url);
    progcache_store_params params = PROGCACHE_STORE_PARAMS_INIT;
    int code = tool_input_bound(cmd, NULL, max, &params.max_artifact_size);
    if (code)
        return code;
    params.log = tool_log;
    params.log_ctx = (void *)cmd;
    if (progcache_store_open_url(out, url, &params) != PROGCACHE_OK) {
        fprintf(stderr, "progcache %s: cannot open the store %s: %s\n", cmd, where,
                progcache_error_last());
        return EXIT_FAILED;
    }
    return EXIT_OK;
}

void tool_mask_url(char *out, size_t size, const char *url)
{
    progcache_url_mask(out, size, url); /* the library's mask: one grammar */
}

int tool_input_bound(const char *cmd, const char *dir, uint64_t given, uint64_t *out)
{
    *out = given;
    if (given)
        return EXIT_OK;
    progcache_settings *s = NULL;
    progcache_buf def = PROGCACHE_BUF_INIT;
    int rc;
    if (dir || (rc = progcache_default_dir(&def)) == PROGCACHE_OK)
        rc = progcache_settings_load(&s, dir ? dir : (const char *)def.data);
    else /* no directory at all: the environment's value, else the default */
        rc = progcache_settings_load(&s, "");
    progcache_buf_free(&def);
    if (rc)
        return tool_lib_error(cmd, EXIT_FAILED, "cannot use the settings");
    *out = progcache_settings_find(s, "max_artifact_size")->number;
    progcache_settings_free(s);
    return EXIT_OK;
}

int tool_open_dir_file(const char *cmd, const char *dir_arg, tool_access access, uint64_t max,
                        char **dir, progcache_file **out)
{
    *dir = NULL;
    int code = tool_resolve_dir(cmd, dir_arg, dir);
    return code ? code : tool_open_file(cmd, *dir, access, max, out);
}

/* ---- output ------------------------------------------------------------------ */

void tool_format_size(char *out, size_t len, uint64_t bytes)
{
    static const char units[] = "KMGTPE";
    if (bytes < 1024) {
        snprintf(out, len, "%llu", (unsigned long long)bytes);
        return;
    }
    double v = (double)bytes / 1024;
    size_t u = 0;
    while (v >= 1024 && u + 1 < sizeof units - 1) {
        v /= 1024;
        u++;
    }
    snprintf(out, len, v < 10 ? "%.1f%c" : "%.0f%c", v, units[u]);
}

void tool_format_size_long(char *out, size_t len, uint64_t bytes)
{
    static const char *units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) {
        snprintf(out, len, "%llu bytes", (unsigned long long)bytes);
        return;
    }
    double v = (double)bytes / 1024;
    size_t u = 0;
    while (v >= 1024 && u + 1 < sizeof units / sizeof units[0]) {
        v /= 1024;
        u++;
    }
    snprintf(out, len, "%.1f %s", v, units[u]);
}

void tool_format_time(char *out, size_t len, int64_t seconds)
{
    time_t t = (time_t)seconds;
    struct tm tm;
    if (!localtime_r(&t, &tm) || !strftime(out, len, "%Y-%m-%d %H:%M:%S", &tm))
        snprintf(out, len, "@%lld", (long long)seconds);
}

/* Every subcommand's output goes through stdout's buffer; a write error
 * (a full disk, a closed pipe's reader gone, > /dev/full) is only sure to
 * show at the final flush and close, so they are checked here, once, for
 * every subcommand: a command whose output was lost must not exit 0. */
static int finish_stdout(const char *cmd, int code)
{
    int err = 0;
    if (fflush(stdout) != 0)
        err = errno;
    /* An error seen earlier (a long text is written past the buffer, and
     * the buffer is then empty at the flush): a write of nothing asks the
     * file again (/dev/full: ENOSPC), without adding to the output. */
    if (ferror(stdout) && !err)
        err = write(STDOUT_FILENO, "", 0) < 0 ? errno : EIO;
    if (fclose(stdout) != 0 && !err)
        err = errno;
    if (!err)
        return code;
    fprintf(stderr, "progcache%s%s: cannot write standard output: %s\n", cmd ? " " : "",
            cmd ? cmd : "", strerror(err));
    return code == EXIT_USAGE ? code : EXIT_FAILED;
}

/* A subcommand by name, or NULL. */
static tool_command_fn find(const char *name)
{
    for (size_t i = 0; i < NUM_COMMANDS; i++)
        if (!strcmp(name, commands[i].name))
            return commands[i].fn;
    return NULL;
}

static int unknown_command(const char *name)
{
    const char *names[NUM_COMMANDS];
    for (size_t i = 0; i < NUM_COMMANDS; i++)
        names[i] = commands[i].name;
    const char *near = tool_suggest(name, names, NUM_COMMANDS);
    if (near)
        fprintf(stderr, "progcache: unknown command '%s'; did you mean '%s'?\n", name, near);
    else
        fprintf(stderr, "progcache: unknown command '%s' (run 'progcache --help')\n", name);
    return EXIT_USAGE;
}

/* The options before the subcommand: -d, -q, -h, -V. Returns the index
 * of the subcommand in argv, or -1 with *code set. */
static int global_options(int argc, char **argv, int *code)
{
    static const struct option longs[] = {{"dir", required_argument, NULL, 'd'},
                                          {"quiet", no_argument, NULL, 'q'},
                                          {"help", no_argument, NULL, 'h'},
                                          {"version", no_argument, NULL, 'V'},
                                          {"shared-group", required_argument, NULL,
                                           TOOL_OPT_SHARED_GROUP},
                                          {NULL, 0, NULL, 0}};
    opterr = 0;
    int c;
    /* "+": stop at the first argument that is not an option, the
     * subcommand, whose own options follow it. */
    while ((c = getopt_long(argc, argv, "+:d:qhV", longs, NULL)) != -1) {
        switch (c) {
        case 'd': tool_global.dir = optarg; break;
        case 'q': tool_global.quiet = 1; break;
        case TOOL_OPT_SHARED_GROUP:
            if ((*code = tool_shared_group("", optarg)) != EXIT_OK)
                return -1;
            break;
        case 'h':
            usage(stdout);
            *code = finish_stdout(NULL, EXIT_OK);
            return -1;
        case 'V':
            printf("progcache %s\n", progcache_version_string());
            *code = finish_stdout(NULL, EXIT_OK);
            return -1;
        case ':':
            fprintf(stderr, "progcache: %s needs a value (run 'progcache --help')\n",
                    argv[optind - 1]);
            *code = EXIT_USAGE;
            return -1;
        default:
            fprintf(stderr, "progcache: unknown option \"%s\" before the command (run "
                            "'progcache --help')\n",
                    argv[optind - 1]);
            *code = EXIT_USAGE;
            return -1;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        *code = EXIT_USAGE;
        return -1;
    }
    return optind;
}

int main(int argc, char **argv)
{
    int code = EXIT_OK;
    /* The tool says what the library tells it through its own callback
     * (tool_log, "progcache <cmd>: warning: ..."); the library's default
     * writer (PROGCACHE_LOG) would say it a second time. A value the user
     * set is kept: it still reaches what has no callback. */
    setenv("PROGCACHE_LOG", "off", 0);
    int at = global_options(argc, argv, &code);
    if (at < 0)
        return code;
    const char *name = argv[at];
    if (!strcmp(name, "help")) {
        /* progcache help [COMMAND]: the command's --help. */
        if (at + 1 >= argc) {
            usage(stdout);
            return finish_stdout(NULL, EXIT_OK);
        }
        if (!strcmp(argv[at + 1], "help")) {
            printf("usage: progcache help [COMMAND]\n\n"
                   "Print COMMAND's options (as 'progcache COMMAND --help' does), or, without\n"
                   "COMMAND, the list of commands (as 'progcache --help' does).\n");
            return finish_stdout("help", EXIT_OK);
        }
        tool_command_fn fn = find(argv[at + 1]);
        if (!fn)
            return unknown_command(argv[at + 1]);
        char *help_argv[] = {argv[at + 1], "--help", NULL};
        return finish_stdout(argv[at + 1], fn(2, help_argv));
    }
    tool_command_fn fn = find(name);
    if (!fn)
        return unknown_command(name);
    return finish_stdout(name, fn(argc - at, argv + at));
}

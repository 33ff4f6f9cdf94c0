/* progcache: the admin tool. Dispatches to one file per subcommand; the
 * helpers they share (argument parsing, opening the cache directory,
 * formatting) live here too. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

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
    {"remote", cmd_remote, "check the remote tier: reachable, latency, entries, leases"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: progcache <command> [options]\n\n"
                 "Persistent cache of CUDA programs compiled at run time (cuda.core-compatible).\n\n"
                 "commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\nRun 'progcache <command> --help' for a command's options.\n"
                 "  --help       this text\n  --version    print the version\n\n"
                 "The cache directory is --dir, else $PROGCACHE_DIR, else cuda.core's default\n"
                 "($XDG_CACHE_HOME/cuda-python/program-cache or\n"
                 "~/.cache/cuda-python/program-cache).\n"
                 "Exit status: 0 success; 1 a check found problems or an operation failed;\n"
                 "2 bad usage.\n");
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

int tool_unexpected_arg(const char *cmd, const char *arg)
{
    return tool_usage_error(cmd, "unexpected argument \"%s\" (run 'progcache %s --help')", arg,
                            cmd);
}

int tool_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int code = report(cmd, EXIT_PROBLEMS, fmt, ap);
    va_end(ap);
    return code;
}

int tool_lib_error(const char *cmd, int exit_code, const char *what)
{
    fprintf(stderr, "progcache %s: %s: %s\n", cmd, what, progcache_error_last());
    return exit_code;
}

/* ---- argument parsing ---------------------------------------------------- */

int tool_flag_value(const char *cmd, int argc, char **argv, int *i, const char *flag,
                    const char **value)
{
    size_t n = strlen(flag);
    const char *arg = argv[*i];
    if (strncmp(arg, flag, n))
        return 0;
    if (arg[n] == '=') {
        *value = arg + n + 1;
        return 1;
    }
    if (arg[n])
        return 0;
    if (*i + 1 >= argc) {
        tool_usage_error(cmd, "%s needs a value (run 'progcache %s --help')", flag, cmd);
        return -1;
    }
    *value = argv[++*i];
    return 1;
}

int tool_is_help(const char *arg) { return !strcmp(arg, "--help") || !strcmp(arg, "-h"); }

int tool_common_arg(const char *cmd, const char *usage, int argc, char **argv, int *i,
                    const char **dir, int *json)
{
    const char *v;
    if (tool_is_help(argv[*i])) {
        fputs(usage, stdout);
        return EXIT_OK;
    }
    if (json && !strcmp(argv[*i], "--json")) {
        *json = 1;
        return TOOL_ARG_TAKEN;
    }
    int r = tool_flag_value(cmd, argc, argv, i, "--dir", &v);
    if (r < 0)
        return EXIT_USAGE;
    if (r > 0) {
        *dir = v;
        return TOOL_ARG_TAKEN;
    }
    return TOOL_ARG_OTHER;
}

/* Leading decimal digits of text into *out; returns the rest, or NULL when
 * there are none or they overflow. */
static const char *parse_count(const char *text, uint64_t *out)
{
    uint64_t v = 0;
    const char *p = text;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (UINT64_MAX - 9) / 10)
            return NULL;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    *out = v;
    return p == text ? NULL : p;
}

int tool_parse_size(const char *text, uint64_t *out)
{
    uint64_t v;
    const char *p = parse_count(text, &v);
    if (!p)
        return -1;
    unsigned shift = 0;
    switch (*p) {
    case 'k': case 'K': shift = 10; p++; break;
    case 'm': case 'M': shift = 20; p++; break;
    case 'g': case 'G': shift = 30; p++; break;
    case 't': case 'T': shift = 40; p++; break;
    default: break;
    }
    if (shift && *p == 'i')
        p++;
    if (*p == 'B' || (*p == 'b' && !shift))
        p++;
    if (*p || (shift && v > (UINT64_MAX >> shift)))
        return -1;
    *out = v << shift;
    return 0;
}

int tool_parse_age(const char *text, uint64_t *out)
{
    uint64_t v, unit;
    const char *p = parse_count(text, &v);
    if (!p || !p[0] || p[1])
        return -1;
    switch (*p) {
    case 's': unit = 1; break;
    case 'm': unit = 60; break;
    case 'h': unit = 3600; break;
    case 'd': unit = 86400; break;
    case 'w': unit = 7 * 86400; break;
    default: return -1;
    }
    if (v > UINT64_MAX / unit)
        return -1;
    *out = v * unit;
    return 0;
}

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

int tool_max_size_arg(const char *cmd, int argc, char **argv, int *i, uint64_t *max)
{
    const char *v;
    int r = tool_flag_value(cmd, argc, argv, i, "--max-artifact-size", &v);
    if (r <= 0)
        return r;
    if (tool_parse_size(v, max) != 0 || *max == 0) {
        tool_usage_error(cmd,
                         "--max-artifact-size \"%s\": give a size in bytes, or with a suffix "
                         "K, M, G (powers of 1024), such as 2G",
                         v);
        return -1;
    }
    return 1;
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
        if (progcache_default_dir(&buf) != PROGCACHE_OK)
            return tool_lib_error(cmd, EXIT_USAGE, "no cache directory");
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
    return access == TOOL_READ ? PROGCACHE_FILE_READONLY : 0;
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
    if (progcache_file_open(out, path, &opts) != PROGCACHE_OK)
        return tool_lib_error(cmd, EXIT_PROBLEMS, "cannot open the cache");
    return EXIT_OK;
}

/* What the library tells a subcommand (the remote tier failing, a wait for
 * another compile): one line each on stderr, "progcache <cmd>: [warning: ]
 * <message>". Debug lines (repeats of a failure) are left out. */
static void tool_log(void *ctx, int level, const char *message)
{
    if (level < PROGCACHE_LOG_INFO)
        return;
    if (!strncmp(message, "progcache: ", 11))
        message += 11;
    fprintf(stderr, "progcache %s: %s%s\n", (const char *)ctx,
            level >= PROGCACHE_LOG_WARN ? "warning: " : "", message);
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
        return tool_lib_error(cmd, EXIT_PROBLEMS, "cannot open the cache");
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
    if (ferror(stdout) && !err)
        err = EIO;
    if (fclose(stdout) != 0 && !err)
        err = errno;
    if (!err)
        return code;
    fprintf(stderr, "progcache%s%s: cannot write standard output: %s\n", cmd ? " " : "",
            cmd ? cmd : "", strerror(err));
    return code > EXIT_PROBLEMS ? code : EXIT_PROBLEMS;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return finish_stdout(NULL, EXIT_OK);
    }
    if (!strcmp(argv[1], "--version")) {
        printf("progcache %s\n", progcache_version_string());
        return finish_stdout(NULL, EXIT_OK);
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return finish_stdout(commands[i].name, commands[i].fn(argc - 1, argv + 1));
    fprintf(stderr, "progcache: unknown command '%s' (run 'progcache --help')\n", argv[1]);
    return EXIT_USAGE;
}

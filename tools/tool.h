/* The progcache command: shared declarations. Uses only public headers. */
#ifndef PROGCACHE_TOOL_H
#define PROGCACHE_TOOL_H

#include <stdint.h>
#include <stdio.h>

#include "progcache/progcache.h"

/* Exit codes of every subcommand (docs/CLI.md, "Exit status"): 1 when the
 * command looked and the answer is no (a miss, bad entries, programs that
 * did not compile), 3 when it could not look (the cache, a file, a
 * setting or standard output could not be used), so scripts can tell a
 * miss from a broken cache. */
enum { EXIT_OK = 0, EXIT_NO = 1, EXIT_USAGE = 2, EXIT_FAILED = 3 };

/* A subcommand: argv[0] is the subcommand's name. Returns the exit code. */
typedef int (*tool_command_fn)(int argc, char **argv);

int cmd_key(int argc, char **argv);
int cmd_explain(int argc, char **argv);
int cmd_stats(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_prune(int argc, char **argv);
int cmd_clear(int argc, char **argv);
int cmd_get(int argc, char **argv);
int cmd_put(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_warm(int argc, char **argv);
int cmd_remote(int argc, char **argv);
int cmd_config(int argc, char **argv);
int cmd_exec(int argc, char **argv);
int cmd_doctor(int argc, char **argv);

#if defined(__GNUC__)
#define TOOL_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define TOOL_PRINTF(a, b)
#endif

/* Print "progcache <cmd>: <message>\n" to stderr and return EXIT_USAGE. */
int tool_usage_error(const char *cmd, const char *fmt, ...) TOOL_PRINTF(2, 3);

/* Print "progcache <cmd>: <what>: <progcache_error_last()>" and return code. */
int tool_lib_error(const char *cmd, int exit_code, const char *what);

/* Print "progcache <cmd>: <message>\n" to stderr and return EXIT_FAILED. */
int tool_error(const char *cmd, const char *fmt, ...) TOOL_PRINTF(2, 3);

/* ---- the command line (tool_args.c) ----------------------------------------
 * getopt_long's rules for every subcommand: short and long forms, --opt=V
 * and --opt V, unambiguous abbreviations of long options, options before
 * and after the positional arguments, "--" ends the options. The options
 * every subcommand takes (-d/--dir, -q/--quiet, -h/--help, and --json where
 * it has one) may also come before the subcommand: progcache -d D stats. */

/* The options that may come before the subcommand; a subcommand's own
 * -d/-q override them. */
typedef struct tool_globals {
    const char *dir; /* -d DIR, --dir DIR */
    int quiet;       /* -q, --quiet: no progress bar */
} tool_globals;
extern tool_globals tool_global;

/* --shared-group GROUP (long only, before or after the subcommand): the
 * team's group of a group-shared cache, as PROGCACHE_SHARED_GROUP, which it
 * sets. EXIT_OK or EXIT_USAGE (message printed). */
enum { TOOL_OPT_SHARED_GROUP = 0x1000 - 2 };
int tool_shared_group(const char *cmd, const char *group);

/* The value of s's variable when it is set here but the settings did not
 * take it (a value that cannot be used is ignored, docs/CONFIG.md), else
 * NULL: what `config` warns of and `doctor` fails on. */
struct progcache_setting;
const char *tool_setting_ignored(const struct progcache_setting *s);

/* One option of a subcommand besides the common ones. */
typedef struct tool_option {
    const char *name; /* the long name, without "--" */
    int id;           /* a letter: also the short option -<id>; else >= 256 */
    int has_arg;
} tool_option;

/* tool_parser flags */
#define TOOL_JSON 0x1u /* takes --json */
#define TOOL_REST 0x2u /* what follows "--" is not positional: left in rest */

/* What tool_next() returns besides an option's id. */
enum { TOOL_END = -1, TOOL_EXIT = -2, TOOL_ARG = -3 };

typedef struct tool_parser {
    const char *cmd, *usage;
    int argc;
    char **argv;
    const tool_option *opts;
    unsigned int flags;
    const char *arg; /* the option's value, or the positional argument */
    const char *dir; /* -d/--dir: the global one, or the subcommand's */
    int json;        /* --json was given */
    int code;        /* the exit code, with TOOL_EXIT */
    char **rest;     /* TOOL_REST: the arguments after "--" */
    int nrest;
    int positional_only; /* after "--": no more options */
    const char *hint;    /* added to "unknown option" messages, or NULL */
} tool_parser;

/* opts ends with an entry whose name is NULL (NULL: none). */
void tool_parser_init(tool_parser *p, const char *cmd, const char *usage, int argc, char **argv,
                      const tool_option *opts, unsigned int flags);

/* The next option (its id, p->arg its value), positional argument
 * (TOOL_ARG, p->arg), TOOL_END, or TOOL_EXIT: --help was printed
 * (p->code 0) or a usage error (p->code 2, message printed). The common
 * options are handled inside. */
int tool_next(tool_parser *p);

/* The usage error for a positional argument a subcommand does not take:
 * "unexpected argument "ARG" (run 'progcache <cmd> --help')"; EXIT_USAGE. */
int tool_unexpected_arg(const char *cmd, const char *arg);

/* The smallest edit distance (insert, delete, substitute, swap two
 * neighbours) from word to one of names, if at most 2 (1 for words of up
 * to 4 letters): that name, else NULL. For "did you mean ...?". */
const char *tool_suggest(const char *word, const char *const *names, size_t n);

/* A size (progcache_parse_size: K, M, G, T, P are powers of 1024; 1.5G).
 * 0, or -1 for anything else. */
int tool_parse_size(const char *text, uint64_t *out);

/* "7d", "12h", "30m", "45s", "2w": seconds. A unit is required. 0 or -1. */
int tool_parse_age(const char *text, uint64_t *out);

/* Decode an even, non-zero number of hex digits into a malloc'd buffer.
 * NULL when text is not that. */
unsigned char *tool_decode_hex(const char *text, size_t *len);

/* A KEYHEX argument decoded into a malloc'd *key: EXIT_OK, or EXIT_USAGE
 * after saying what a key looks like. */
int tool_key_arg(const char *cmd, const char *key_hex, unsigned char **key, size_t *len);

/* --max-artifact-size SIZE, taken by the subcommands that read inputs:
 * its entry in a tool_option table, and its value (EXIT_OK, or
 * EXIT_USAGE after a message). */
#define TOOL_OPT_MAX_ARTIFACT_SIZE 0x1001
#define TOOL_MAX_ARTIFACT_SIZE_OPTION {"max-artifact-size", TOOL_OPT_MAX_ARTIFACT_SIZE, 1}
int tool_max_size_value(const char *cmd, const char *text, uint64_t *max);

/* ---- inputs and outputs the user names (tool_io.c) ------------------------- */

/* tool_read_input flags */
#define TOOL_INPUT_STDIN 0x1u   /* "-" means standard input */
#define TOOL_INPUT_REGULAR 0x2u /* only a regular file (a FIFO is refused, not waited on) */

/* Read a whole input into a malloc'd, NUL-terminated *data, never more than
 * max bytes: a larger regular file is refused before it is read, a stream
 * (standard input, a pipe, a FIFO, a device such as /dev/zero) once it has
 * given max + 1 bytes, so memory stays bounded by max. A FIFO is read as a
 * pipe is: the open waits for its writer, as cat's does. A directory is
 * refused. what names the input in messages ("FILE", "manifest").
 * EXIT_OK, or EXIT_FAILED after printing "progcache <cmd>: ..." naming
 * the input, its size (or "more than N bytes"), the bound and the option
 * that raises it. */
int tool_read_input(const char *cmd, const char *what, const char *path, unsigned int flags,
                    uint64_t max, unsigned char **data, size_t *size);

/* A file the user names for output (get -o). An existing path that is not
 * a regular file is never replaced: a character device or a FIFO (with a
 * reader: one without is refused, not waited for) is written in place; a
 * directory, a block device or a socket is refused. A regular file, or no
 * file, gets a temporary file in the same directory, renamed over the path
 * once complete, so a failed write leaves the old file as it was. A
 * symbolic link is followed (the link stays; its target gets the bytes); a
 * dangling one is refused. */
typedef struct tool_output {
    const char *path; /* as given */
    int fd;
    int dirfd;        /* the directory of the temp file, or -1 (in place) */
    char *tmp;        /* its name in dirfd, malloc'd, or NULL */
    char *final;      /* the name to rename it to in dirfd, malloc'd */
} tool_output;

/* Open path. EXIT_OK, or an exit code after a message. */
int tool_output_open(const char *cmd, const char *path, tool_output *out);
/* Write len bytes; EXIT_OK or EXIT_FAILED after a message. */
int tool_output_write(const char *cmd, tool_output *out, const void *data, size_t len);
/* ok: complete it (fsync, rename the temp file into place); else discard
 * the temp file. Returns EXIT_OK or EXIT_FAILED (message printed); the
 * struct is released either way. */
int tool_output_close(const char *cmd, tool_output *out, int ok);

/* ---- headers in memory (tool_headers.c) ------------------------------------- */

/* The headers given with --header NAME=FILE, as the key options take them;
 * names and contents are malloc'd. */
typedef struct tool_headers {
    progcache_header *items;
    size_t len;
} tool_headers;

/* Add arg ("NAME=FILE"): read FILE (relative to the directory of base when
 * base is not NULL and FILE is not absolute; at most max bytes; no NUL
 * byte). what names the argument in messages ("--header", or
 * "MANIFEST:LINE: --header"). EXIT_OK, or an exit code after a message. */
int tool_headers_add(tool_headers *h, const char *cmd, const char *what, const char *arg,
                     const char *base, uint64_t max);
void tool_headers_free(tool_headers *h);

/* ---- the cache directory --------------------------------------------------- */

/* How a subcommand uses the directory. */
typedef enum tool_access {
    TOOL_READ,   /* look only: opened read-only; must exist */
    TOOL_WRITE,  /* change it: must exist */
    TOOL_CREATE  /* add to it: created when missing */
} tool_access;

/* The directory: dir as given (--dir), else progcache_default_dir()
 * ($PROGCACHE_DIR, then cuda.core's default). Writes a malloc'd path into
 * *out; returns EXIT_OK or an exit code (message printed). */
int tool_resolve_dir(const char *cmd, const char *dir, char **out);

/* Open the cache directory's file store / a cache handle on it, with
 * max_artifact_size max (0: the library's default). Return EXIT_OK, or an
 * exit code after printing what went wrong. */
int tool_open_file(const char *cmd, const char *path, tool_access access, uint64_t max,
                    progcache_file **out);
int tool_open_cache(const char *cmd, const char *path, tool_access access, uint64_t max,
                    progcache **out);

/* The bound on what a subcommand reads (tool_read_input) and stores:
 * given (--max-artifact-size) when not 0, else the setting
 * max_artifact_size of dir (its settings file, $PROGCACHE_MAX_ARTIFACT_SIZE,
 * else 1 GiB); dir NULL: the default directory, or, when there is none,
 * the environment and the default alone, as for dir "". EXIT_OK, or EXIT_FAILED after
 * saying which setting cannot be used. */
int tool_input_bound(const char *cmd, const char *dir, uint64_t given, uint64_t *out);

/* Both steps for a subcommand that works on the file store: resolve the
 * directory into *dir (malloc'd, NULL when that failed; the caller frees
 * it), then open its store. EXIT_OK or an exit code (message printed). */
int tool_open_dir_file(const char *cmd, const char *dir_arg, tool_access access, uint64_t max,
                        char **dir, progcache_file **out);

/* ---- a store named by URL (--remote) --------------------------------------- */

/* --remote URL, taken by ls, verify and export: a store that
 * progcache_store_open_url knows (redis://..., unix:..., a registered
 * tier's name:...) served instead of the cache directory, through
 * progcache_store_foreach. Its entry in a tool_option table. */
#define TOOL_OPT_REMOTE 0x1002
#define TOOL_REMOTE_OPTION {"remote", TOOL_OPT_REMOTE, 1}

/* The remote tier a program would open (cmd_remote.c): url_arg, else
 * $PROGCACHE_REMOTE (with $PROGCACHE_REMOTE_SECRET_FILE); secret_file and
 * prefix may be NULL. EXIT_OK, or EXIT_NO after a message naming cmd (none
 * configured, a URL or secret file that cannot be used). *source says
 * where the URL came from ("--url", "$PROGCACHE_REMOTE"). */
int tool_remote_open(const char *cmd, const char *url_arg, const char *secret_file,
                     const char *prefix, progcache_store **out, const char **source);

/* Open the store url names, reading at most max (0: the setting
 * max_artifact_size), its log on stderr as the cache's. EXIT_OK, or
 * EXIT_FAILED after saying why. */
int tool_open_remote(const char *cmd, const char *url, uint64_t max, progcache_store **out);

/* url for messages and output: a password in it ("redis://u:pw@h")
 * replaced by "***" (progcache_url_mask). */
void tool_mask_url(char *out, size_t size, const char *url);

/* ---- progress bars (tool_progress.c) -------------------------------------- */

/* A progress bar on standard error, drawn only when it is a terminal and
 * --quiet was not given: "[####......] 40/100 importing  12/s  ETA 0:05",
 * redrawn at most ten times a second (and at each phase's end), and ended
 * with a newline. */
typedef struct tool_progress {
    int on;
    char what[24];
    uint64_t done, total;
    double phase_start, last_draw; /* ms, monotonic */
    int drawn;
} tool_progress;

void tool_progress_start(tool_progress *p);
/* A progcache_progress_fn (ctx: the tool_progress); returns 0. */
int tool_progress_cb(void *ctx, const char *what, uint64_t done, uint64_t total);
/* Draw (if due) with an extra note after the numbers (NULL: none). */
void tool_progress_note(tool_progress *p, const char *what, uint64_t done, uint64_t total,
                        const char *note);
void tool_progress_end(tool_progress *p);

/* ---- the shape of a cache (stats_charts.c) -------------------------------- */

/* Small bar charts of file's entries by last use and by size, the hit
 * rate and how full the cap is, on standard output (UTF-8 blocks when the
 * locale says UTF-8, else '#'). EXIT_OK, or EXIT_FAILED (message printed). */
int tool_stats_charts(const char *cmd, progcache_file *file, const progcache_stats *s);

/* ---- metrics (stats_metrics.c) ------------------------------------------- */

/* One counter of `progcache stats`: its text label and its JSON key. */
typedef struct tool_counter {
    const char *label; /* text output */
    const char *key;   /* JSON; the metric's name after "progcache_" */
    uint64_t value;
} tool_counter;

/* The formats of `stats --format` besides text and json. */
enum { TOOL_METRICS_OPENMETRICS = 1, TOOL_METRICS_PROMETHEUS };

/* Write s and the counters c[0..n) for a scraper (docs/OPERATIONS.md,
 * "Metrics"): OpenMetrics 1.0 (counters as families with _total samples,
 * ending in "# EOF") or the Prometheus text format 0.0.4 that
 * node_exporter's textfile collector and `promtool check metrics` read. */
void tool_stats_metrics(FILE *f, int format, const char *dir, const progcache_stats *s,
                        const tool_counter *c, size_t n);

/* ---- output ------------------------------------------------------------------ */

/* "3832", "3.7K", "1.2M", "2.0G": compact, for columns. */
void tool_format_size(char *out, size_t len, uint64_t bytes);
/* The eviction passes the library reports ("evicted N entries (B bytes)
 * ...", one line each) summed instead of printed, from now on, for a
 * command that says them in one line of its own (warm); the sums so far. */
void tool_fold_evictions(void);
void tool_folded_evictions(uint64_t *entries, uint64_t *bytes);
/* "entry" for 1, else "entries": "1 entry", "0 entries". */
const char *tool_entries(uint64_t n);
/* "3.7 KiB", "512 bytes": for prose. */
void tool_format_size_long(char *out, size_t len, uint64_t bytes);
/* Local time "2026-11-30 14:03:59" of ns (or s) since 1970. */
void tool_format_time(char *out, size_t len, int64_t seconds);

/* Write s as a JSON string literal (quoted, escaped). Valid UTF-8 is
 * written as it is; each byte that is not part of a valid UTF-8 sequence
 * (0x80-0xff) as the escape \udcXX, as Python's "surrogateescape" error
 * handler decodes it, so that os.fsencode(json.loads(text)) gives back the
 * exact bytes of a path (docs/CLI.md, "JSON output"). */
void tool_json_string(FILE *f, const char *s);

/* The version of every --json output's layout, its "schema" field. */
#define TOOL_JSON_SCHEMA 1
/* Start a --json output: '{"schema": 1' (the caller goes on with ", ..."). */
void tool_json_begin(FILE *f);

#endif

/* The progcache command: shared declarations. Uses only public headers. */
#ifndef PROGCACHE_TOOL_H
#define PROGCACHE_TOOL_H

#include <stdint.h>
#include <stdio.h>

#include "progcache/progcache.h"

/* Exit codes of every subcommand. */
enum { EXIT_OK = 0, EXIT_PROBLEMS = 1, EXIT_USAGE = 2 };

/* A subcommand: argv[0] is the subcommand's name. Returns the exit code. */
typedef int (*tool_command_fn)(int argc, char **argv);

int cmd_key(int argc, char **argv);
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

#if defined(__GNUC__)
#define TOOL_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define TOOL_PRINTF(a, b)
#endif

/* Print "progcache <cmd>: <message>\n" to stderr and return EXIT_USAGE. */
int tool_usage_error(const char *cmd, const char *fmt, ...) TOOL_PRINTF(2, 3);

/* The usage error for an argument a subcommand does not take:
 * "unexpected argument "ARG" (run 'progcache <cmd> --help')"; EXIT_USAGE. */
int tool_unexpected_arg(const char *cmd, const char *arg);

/* Print "progcache <cmd>: <what>: <progcache_error_last()>" and return code. */
int tool_lib_error(const char *cmd, int exit_code, const char *what);

/* Print "progcache <cmd>: <message>\n" to stderr and return EXIT_PROBLEMS. */
int tool_error(const char *cmd, const char *fmt, ...) TOOL_PRINTF(2, 3);

/* ---- argument parsing ---------------------------------------------------- */

/* "--flag VALUE" or "--flag=VALUE" at argv[*i]. Returns 1 and sets *value
 * (advancing *i past a separate VALUE) when argv[*i] is flag; 0 when it is
 * not; -1 when VALUE is missing (a usage error for cmd was printed). */
int tool_flag_value(const char *cmd, int argc, char **argv, int *i, const char *flag,
                    const char **value);

/* Whether argv[i] asks for help (--help, -h). */
int tool_is_help(const char *arg);

/* The arguments every subcommand takes, for its argument loop: --help
 * (prints usage, returns EXIT_OK), --json (when json is not NULL) and
 * --dir DIR / --dir=DIR. Returns TOOL_ARG_TAKEN (go on with the next
 * argument), TOOL_ARG_OTHER (not one of these), or an exit code to return
 * (EXIT_OK after --help, EXIT_USAGE when --dir lacks its value). */
enum { TOOL_ARG_TAKEN = -1, TOOL_ARG_OTHER = -2 };
int tool_common_arg(const char *cmd, const char *usage, int argc, char **argv, int *i,
                    const char **dir, int *json);

/* "512M", "2G", "100K", "1T", "4096" (bytes; K/M/G/T are powers of 1024,
 * an optional trailing "B" or "iB" is accepted). 0, or -1 for anything
 * else (including overflow). */
int tool_parse_size(const char *text, uint64_t *out);

/* "7d", "12h", "30m", "45s", "2w": seconds. A unit is required. 0 or -1. */
int tool_parse_age(const char *text, uint64_t *out);

/* Decode an even, non-zero number of hex digits into a malloc'd buffer.
 * NULL when text is not that. */
unsigned char *tool_decode_hex(const char *text, size_t *len);

/* A KEYHEX argument decoded into a malloc'd *key: EXIT_OK, or EXIT_USAGE
 * after saying what a key looks like. */
int tool_key_arg(const char *cmd, const char *key_hex, unsigned char **key, size_t *len);

/* --max-artifact-size SIZE at argv[*i] (tool_flag_value's 1, 0, -1; -1
 * also for a size that is not one, after a usage error). */
int tool_max_size_arg(const char *cmd, int argc, char **argv, int *i, uint64_t *max);

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
 * EXIT_OK, or EXIT_PROBLEMS after printing "progcache <cmd>: ..." naming
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
/* Write len bytes; EXIT_OK or EXIT_PROBLEMS after a message. */
int tool_output_write(const char *cmd, tool_output *out, const void *data, size_t len);
/* ok: complete it (fsync, rename the temp file into place); else discard
 * the temp file. Returns EXIT_OK or EXIT_PROBLEMS (message printed); the
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

/* Both steps for a subcommand that works on the file store: resolve the
 * directory into *dir (malloc'd, NULL when that failed; the caller frees
 * it), then open its store. EXIT_OK or an exit code (message printed). */
int tool_open_dir_file(const char *cmd, const char *dir_arg, tool_access access, uint64_t max,
                        char **dir, progcache_file **out);

/* ---- output ------------------------------------------------------------------ */

/* "3832", "3.7K", "1.2M", "2.0G": compact, for columns. */
void tool_format_size(char *out, size_t len, uint64_t bytes);
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

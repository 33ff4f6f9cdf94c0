/* Running the persistentProgramCache sample from a test and reading what it
 * printed. */
#ifndef PROGCACHE_TEST_SAMPLE_RUN_H
#define PROGCACHE_TEST_SAMPLE_RUN_H

#include <stddef.h>
#include <sys/types.h>

#define SAMPLE_MAX_LINES 64

typedef struct sample_output {
    int status;   /* exit status, or 128+signal */
    char *out;    /* all of stdout (split into lines in place) */
    size_t out_size;
    char *err;    /* all of stderr */
    char *lines[SAMPLE_MAX_LINES]; /* stdout split at newlines (into out) */
    size_t num_lines;
} sample_output;

/* Options of one run: argv[0] is set by sample_start; cwd and env (a
 * NULL-terminated list of "NAME=value" added to the environment) may be
 * NULL. */
typedef struct sample_run {
    const char *exe;
    const char *const *args; /* NULL-terminated, without argv[0] */
    const char *cwd;
    const char *const *env;
} sample_run;

/* Start a run; its output goes to files under scratch. Returns the pid. */
pid_t sample_start(const sample_run *run, const char *scratch, int slot);
/* Undo the split of stdout into lines: out->out is the whole text again
 * (and out->lines must not be used afterwards). */
const char *sample_stdout_text(sample_output *out);

/* Wait for a run started with slot and read its output. */
void sample_finish(sample_output *out, pid_t pid, const char *scratch, int slot);
/* Start and finish. */
void sample_exec(sample_output *out, const sample_run *run, const char *scratch);
void sample_output_free(sample_output *out);

/* The value after the 20-column label of the line starting with label, or
 * NULL. */
const char *sample_value(const sample_output *out, const char *label);

/* Whether any line of stdout contains text. */
int sample_contains(const sample_output *out, const char *text);

/* Whether text matches the POSIX extended regular expression re (whole
 * string). */
int sample_match(const char *text, const char *re);

/* Print a run's output to stderr (for failing checks). */
void sample_dump(const sample_output *out);

/* Run the sample with args and check it refused them as bad usage: exit
 * status 2, nothing on stdout, and one line on stderr, starting with
 * "persistentProgramCache: " and containing message. */
void sample_expect_usage_error(const char *exe, const char *scratch, const char *const *args,
                               const char *message);

/* What a successful run must have printed. */
typedef struct sample_expect {
    const char *status;   /* "MISS", "HIT", "DISABLED" (reason follows) or "HEALED" */
    const char *cache_dir;
    int m, n, k, tile;
    const char *epilogue;
    int warmup, iterations;
    int gpu; /* 1: launched and validated; 0: skipped without a device */
} sample_expect;

/* Check every line of a run's stdout, in order and format, against the
 * issue's layout; abort the test (after dumping the output) when one is
 * off. Writes the 24 hex digits of the printed key into key24 (25 bytes). */
void sample_check_format(const sample_output *out, const sample_expect *expect, char *key24);
/* The same for --kernel fast: tile_text is the exact value of the Tile size
 * line (NULL: expect->tile as a number), and extra_lines lines (Throughput,
 * Autotune) must follow Validation (the tiled kernel prints none). */
void sample_check_format_ex(const sample_output *out, const sample_expect *expect, char *key24,
                            const char *tile_text, size_t extra_lines);

#endif

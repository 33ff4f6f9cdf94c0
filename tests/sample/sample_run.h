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

/* The start of a sample test run as `test SAMPLE_EXE`: the sample's path
 * made absolute in *exe (runs change directory), a fresh scratch folder
 * (test_mkdtemp(tag)) in *scratch. Returns whether a real GPU answers
 * (then --arch runs launch and validate too). sample_teardown removes
 * the scratch folder and frees both. */
int sample_setup(int argc, char **argv, const char *tag, char **exe, char **scratch);
void sample_teardown(char *exe, char *scratch);

/* Device 0 through the CUDA driver, for the gpu tests: its architecture
 * ("sm_90") in arch and, when name is not NULL, its name. Without a
 * driver or a device the test (named test) prints why and exits 77. */
void sample_gpu_or_skip(const char *test, char *arch, size_t arch_len, char *name,
                        size_t name_len);

/* Key interop: `progcache key` (PROGCACHE_BIN) on the source file at path
 * for sm_90 and C++17, and the sample run with args, which must succeed
 * and print that key (its first 24 digits) as its Cache key. */
void sample_expect_key_of(const char *exe, const char *scratch, const char *path,
                          const char *const *args);

/* A table of refused command lines: each run must end as
 * sample_expect_usage_error says, with its message. */
typedef struct sample_usage_case {
    const char *args[5]; /* NULL-terminated (the unused tail is NULL) */
    const char *message;
} sample_usage_case;
void sample_expect_usage_errors(const char *exe, const char *scratch,
                                const sample_usage_case *cases, size_t n);

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

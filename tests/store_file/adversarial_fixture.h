/* The helpers the test_adversarial_*.c files share; see
 * adversarial_fixture.c. */
#ifndef PROGCACHE_TESTS_ADVERSARIAL_FIXTURE_H
#define PROGCACHE_TESTS_ADVERSARIAL_FIXTURE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "check.h"
#include "progcache/admin.h"
#include "progcache/stats.h"
#include "store/file/file_store.h"

/* What the stores of open_store_opts() log, a line a message. */
extern char log_text[8192];

void capture_log(void *ctx, int level, const char *message);
progcache_store *open_store_opts(const char *dir, uint64_t max_size, unsigned int flags,
                                 uint64_t max_artifact);
progcache_store *open_store(const char *dir);
void path_of(char *out, size_t len, const char *dir, const char *rel);
void entry_of(char *out, size_t len, const char *dir, const char *key);
void write_file(const char *path, const char *text);
void age(const char *path, time_t seconds);
int exists(const char *path);
mode_t type_of(const char *path);
/* The file holds exactly text. */
int holds(const char *path, const char *text);
size_t count_names(const char *dir, const char *prefix);
/* A socket at path, bound from inside its directory. 0 or -1. */
int make_socket(const char *path);
/* Run fn in a child under alarm(seconds): it must exit 0, not hang and
 * not die of a signal. */
void in_child(void (*fn)(void *), void *arg, unsigned int seconds, const char *what);
int have_xattrs(const char *dir);

/* What verify() saw: bad entries, removed ones, foreign files, the lines. */
typedef struct seen {
    int bad, removed, foreign;
    char text[4096];
} seen;

void verify(progcache_verify_result *res, seen *v, progcache_store *s, unsigned int flags);

typedef struct adversarial_test {
    const char *name;
    void (*fn)(void);
} adversarial_test;
/* A row of the table: ADVERSARIAL_TEST(fifo_at_entry) runs test_fifo_at_entry
 * under the name "fifo_at_entry". */
#define ADVERSARIAL_TEST(name) {#name, test_##name}

/* Runs the tests; with an argument, only the test of that name (for a
 * bisect). Prints "label: all passed". */
void adversarial_run(int argc, char **argv, const adversarial_test *tests, size_t n,
                     const char *label);

/* A topic's main: its table of ADVERSARIAL_TEST rows, run by adversarial_run. */
#define ADVERSARIAL_MAIN(label, ...)                                           \
    int main(int argc, char **argv)                                            \
    {                                                                          \
        static const adversarial_test tests[] = {__VA_ARGS__};                 \
        adversarial_run(argc, argv, tests, sizeof tests / sizeof tests[0], label); \
        return 0;                                                              \
    }

#endif

/* The library's own writer of its log (PROGCACHE_LOG, docs/OPERATIONS.md):
 * what a program that passed no log callback is told. Without it the
 * library was silent, and a cache that is off, read-only, not trusted or
 * missing its remote tier looked like one that simply missed.
 *
 * By default each warning is written once per process and cause (its
 * format string) to stderr: a loop of compiles with a broken remote tier
 * says so once, not a thousand times. PROGCACHE_LOG chooses the level,
 * "off", and a file (appended to, one line per message, each with the
 * process id so that many processes can share it). A callback in the
 * options replaces this writer for what goes through it. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "error.h"

#define SEEN_MAX 256
#define LOG_OFF 99

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int threshold = PROGCACHE_LOG_WARN; /* the lowest level written */
static int each_once = 1;                  /* the default: a cause once */
static int trace;                          /* PROGCACHE_LOG=debug was asked for */
static FILE *sink;                         /* NULL: stderr */
static const char *seen[SEEN_MAX];
static size_t num_seen;
static char refused[160]; /* a value of PROGCACHE_LOG that was ignored */

static void configure(void)
{
    int level = 0;
    const char *file = NULL, *bad = NULL;
    int rc = progcache__config_log(&level, &file, &bad);
    if (rc == PROGCACHE_OK) {
        threshold = level < 0 ? LOG_OFF : level;
        each_once = 0;
        trace = level == PROGCACHE_LOG_DEBUG;
    } else if (rc == PROGCACHE_EINVAL) {
        snprintf(refused, sizeof refused, "%.120s", bad);
    }
    if (file && !(sink = fopen(file, "ae")))
        snprintf(refused, sizeof refused, "%.100s (%s)", file, strerror(errno));
}

static int configured_threshold(void)
{
    pthread_once(&once, configure);
    return threshold;
}

int progcache__log_trace(void)
{
    pthread_once(&once, configure);
    return trace;
}

int progcache__log_wanted(progcache_log_fn log, int level)
{
    return log || level >= configured_threshold();
}

static int first_time(const char *cause)
{
    for (size_t i = 0; i < num_seen; i++)
        if (seen[i] == cause)
            return 0;
    if (num_seen < SEEN_MAX)
        seen[num_seen++] = cause;
    return 1;
}

static const char *level_word(int level)
{
    return level >= PROGCACHE_LOG_ERROR  ? "error: "
           : level >= PROGCACHE_LOG_WARN ? "warning: "
           : level >= PROGCACHE_LOG_INFO ? ""
                                         : "debug: ";
}

void progcache__log_default(int level, const char *cause, const char *message)
{
    if (level < configured_threshold())
        return;
    /* compile-or-load's messages name the library already */
    if (!strncmp(message, "progcache: ", 11))
        message += 11;
    pthread_mutex_lock(&lock);
    if (refused[0]) {
        fprintf(stderr, "progcache: warning: PROGCACHE_LOG: \"%s\" cannot be used: give off, "
                        "error, warn, info or debug, optionally :FILE (a file this user can "
                        "append to); ignored\n",
                refused);
        refused[0] = '\0';
    }
    if (!each_once || level < PROGCACHE_LOG_WARN || first_time(cause)) {
        if (sink) {
            fprintf(sink, "progcache[%ld]: %s%s\n", (long)getpid(), level_word(level), message);
            fflush(sink);
        } else {
            fprintf(stderr, "progcache: %s%s\n", level_word(level), message);
        }
    }
    pthread_mutex_unlock(&lock);
}

void progcache__log_asked(progcache_log_fn log, void *ctx, const char *message)
{
    if (log) {
        log(ctx, PROGCACHE_LOG_INFO, message);
        return;
    }
    /* Asked for by its own variable: written at the default threshold too
     * (warn), and each time; not when PROGCACHE_LOG is off or error. */
    if (configured_threshold() > PROGCACHE_LOG_WARN)
        return;
    if (!strncmp(message, "progcache: ", 11))
        message += 11;
    pthread_mutex_lock(&lock);
    if (sink) {
        fprintf(sink, "progcache[%ld]: %s\n", (long)getpid(), message);
        fflush(sink);
    } else {
        fprintf(stderr, "progcache: %s\n", message);
    }
    pthread_mutex_unlock(&lock);
}

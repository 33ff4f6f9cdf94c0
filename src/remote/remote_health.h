/* Internal: a remote tier's counters, its back-off ("circuit breaker") and
 * its voice in the log, the same for every remote tier (Redis, HTTP, S3),
 * kept apart from any client library so that the rules can be tested with
 * a clock the test controls.
 *
 * The rules: a call that failed to reach the server (no connection, a
 * timeout, a lost connection) adds one to the failures in a row; a call
 * that succeeded resets them. When they reach the limit, the store is off
 * for backoff_ms: calls return at once and are counted as skipped. The
 * count is then left one short of the limit, so the first failure after
 * the period switches the store off again at once, until a call succeeds.
 * Error replies count as errors but not as failures in a row: the server
 * is up and answering. Everything is lock-free (relaxed atomics): the
 * counters are statistics, and a race at the limit costs at most one extra
 * attempt or one extra back-off.
 *
 * Telling the log (docs/REMOTE.md, "Messages"): every failure is counted,
 * but the log callback hears each cause once at WARN, the first time it
 * happens in the store (a process's lifetime, for a program with one
 * cache); repeats go to DEBUG only, so a dead server costs two lines (the
 * first failure and the back-off), not one per call. An outage (the causes
 * in PROGCACHE__CAUSES_OUTAGE) is told again after the tier recovered: the
 * first call that succeeds after a back-off is told at INFO ("reachable
 * again") and re-arms those causes. */
#ifndef PROGCACHE_REMOTE_HEALTH_H
#define PROGCACHE_REMOTE_HEALTH_H

#include <stdatomic.h>
#include <stdint.h>

#include "progcache/remote.h"
#include "progcache/store.h" /* progcache_store_counters */
#include "progcache/common.h" /* progcache_log_fn */

#include "error.h" /* PROGCACHE_PRINTF */

typedef enum progcache__remote_counter {
    PROGCACHE__RC_HITS,
    PROGCACHE__RC_MISSES,
    PROGCACHE__RC_ERRORS,
    PROGCACHE__RC_TIMEOUTS,
    PROGCACHE__RC_STORES,
    PROGCACHE__RC_STORE_ERRORS,
    PROGCACHE__RC_REJECTED,
    PROGCACHE__RC_SKIPPED,
    PROGCACHE__RC_DROPPED,
    PROGCACHE__RC_BACKOFFS,
    PROGCACHE__RC_NEWER,
    PROGCACHE__RC_TOO_LARGE,
    PROGCACHE__RC_BAD_TAG,
    PROGCACHE__RC_OVER_BOUND, /* replies over their bound (redis_reply.c) */
    PROGCACHE__RC_DEADLINES,  /* commands stopped at their deadline (part of timeouts) */
    PROGCACHE__RC_COUNT
} progcache__remote_counter;

/* Why the tier was not used, for the once-per-cause rule. */
typedef enum progcache__remote_cause {
    PROGCACHE__CAUSE_CONNECT,    /* no connection: refused, unreachable, unknown host */
    PROGCACHE__CAUSE_AUTH,       /* AUTH or SELECT refused: wrong password, user, db */
    PROGCACHE__CAUSE_TIMEOUT,    /* the connect or command timeout ran out */
    PROGCACHE__CAUSE_LOST,       /* the connection broke during a command */
    PROGCACHE__CAUSE_REFUSED,    /* an error reply (OOM, READONLY, WRONGTYPE, ...) */
    PROGCACHE__CAUSE_PROTOCOL,   /* a reply of a type the command never gives */
    PROGCACHE__CAUSE_BACKOFF,    /* switched off after failures in a row */
    PROGCACHE__CAUSE_REJECTED,   /* a value that failed the envelope checks */
    PROGCACHE__CAUSE_BAD_TAG,    /* a value whose HMAC tag is missing or wrong */
    PROGCACHE__CAUSE_NEWER,      /* a value written by a newer progcache */
    PROGCACHE__CAUSE_TOO_LARGE,  /* a value over max_artifact_size */
    PROGCACHE__CAUSE_NOT_STORED, /* a write that could not be prepared */
    PROGCACHE__CAUSE_DROPPED,    /* a background write dropped: queue full */
    PROGCACHE__CAUSE_BOUND,      /* a reply over its bound: a hostile or broken server */
    PROGCACHE__CAUSE_CHANGED,    /* a value replaced while its parts were read */
    PROGCACHE__CAUSE_COUNT
} progcache__remote_cause;

/* The causes of an outage: told again after the tier recovered. */
#define PROGCACHE__CAUSES_OUTAGE                                                               \
    (1u << PROGCACHE__CAUSE_CONNECT | 1u << PROGCACHE__CAUSE_AUTH |                           \
     1u << PROGCACHE__CAUSE_TIMEOUT | 1u << PROGCACHE__CAUSE_LOST |                           \
     1u << PROGCACHE__CAUSE_BACKOFF)

typedef struct progcache__remote_health {
    _Atomic uint64_t counters[PROGCACHE__RC_COUNT];
    atomic_uint failures;          /* failed calls in a row */
    _Atomic uint64_t off_until_ms; /* end of the back-off; 0: never armed */
    atomic_uint told;              /* causes told to the log (1 << cause) */
    atomic_int down;               /* 1 from a back-off until a call succeeds */
    unsigned int limit;            /* failures that switch the store off (>= 1) */
    unsigned int backoff_ms;
} progcache__remote_health;

void progcache__remote_health_init(progcache__remote_health *h, unsigned int limit,
                                  unsigned int backoff_ms);

/* Milliseconds on the monotonic clock (the now_ms the store passes). */
uint64_t progcache__remote_now_ms(void);

void progcache__remote_count(progcache__remote_health *h, progcache__remote_counter c);

/* 1 while backing off at now_ms (and the call is counted as skipped). */
int progcache__remote_is_off(progcache__remote_health *h, uint64_t now_ms);

/* A call that reached the server. Returns 1 when it ended a back-off (the
 * tier recovered: tell the log, at INFO; the outage causes are re-armed),
 * else 0. */
int progcache__remote_ok(progcache__remote_health *h);

/* 1 when cause has not been told to the log yet (it is marked told now):
 * tell it at WARN; 0: tell it at DEBUG only. */
int progcache__remote_first(progcache__remote_health *h, progcache__remote_cause cause);

/* A failed call (timeout: it ran out of time; reached: the server answered
 * with an error, so it does not count towards back-off). Returns the
 * failures in a row when this call switched the store off, else 0. */
unsigned int progcache__remote_failed(progcache__remote_health *h, int timeout, int reached,
                                     uint64_t now_ms);

/* Copy the counters into out: the fields of out->version (1 or more). */
void progcache__remote_counters_fill(progcache_redis_counters *out,
                                    const progcache__remote_health *h);

/* The counts the cache folds into its statistics (the vtable's counters):
 * calls skipped while backing off and puts dropped from a full queue are
 * failures of the tier as much as errors are. */
void progcache__remote_store_counters(progcache_store_counters *out,
                                      const progcache__remote_health *h);

/* ---- telling the log: one voice for every remote tier ------------------ */

/* Who speaks for a tier: the log callback (NULL: silent), and the tier's
 * name as every message starts, "<label> <where>: " (where masked: no
 * credential, url_mask.h). Both strings outlive the voice. */
typedef struct progcache__remote_voice {
    progcache_log_fn log;
    void *log_ctx;
    const char *label; /* "Redis", "remote tier" */
    const char *where;
} progcache__remote_voice;

/* One message at level, named after the tier. */
void progcache__remote_say(const progcache__remote_voice *v, int level, const char *fmt, ...)
    PROGCACHE_PRINTF(3, 4);

/* A failure of cause: at WARN the first time (with the told-once note),
 * at DEBUG after (the rule above). */
void progcache__remote_tell(progcache__remote_health *h, const progcache__remote_voice *v,
                            progcache__remote_cause cause, const char *fmt, ...)
    PROGCACHE_PRINTF(4, 5);

/* A call that did not reach its answer, as the tier saw it. */
typedef struct progcache__remote_fault {
    progcache__remote_cause cause; /* told under this cause */
    int timeout;    /* ran out of time (counted as a timeout) */
    int deadline;   /* the part of timeout: the operation's deadline ran out */
    int reached;    /* the server answered with an error: no back-off */
    int over_bound; /* a reply over its bound */
    const char *what;
} progcache__remote_fault;

/* A failed call: counted (errors, timeouts, deadlines, over_bound), told,
 * and the back-off armed and told when it is one failure too many. */
void progcache__remote_fault_note(progcache__remote_health *h, const progcache__remote_voice *v,
                                  const progcache__remote_fault *f);

/* A call that reached the server: tells "reachable again" at INFO when it
 * ended an outage. */
void progcache__remote_note_ok(progcache__remote_health *h, const progcache__remote_voice *v);

/* A put that will not be written: counted (store_errors, too_large for
 * PROGCACHE__CAUSE_TOO_LARGE) and told as "...; not stored". */
void progcache__remote_not_stored(progcache__remote_health *h, const progcache__remote_voice *v,
                                  progcache__remote_cause cause, const char *fmt, ...)
    PROGCACHE_PRINTF(4, 5);

#endif

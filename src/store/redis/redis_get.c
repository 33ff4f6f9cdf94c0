/* Reading one value from Redis within a bound of the value plus a small
 * constant (docs/SECURITY.md, "A hostile server"; docs/REMOTE.md, "Reading
 * a value").
 *
 * A plain GET has the whole bulk string buffered by hiredis's reader, then
 * copied into a reply object, then copied into the caller's buffer: about
 * three times the value at the peak. So a value is read in parts with
 * GETRANGE, PART bytes each. The first part carries the envelope's header
 * (envelope.h), which says how long the whole value is: that length is
 * checked against the bound (read_limit) BEFORE anything is allocated, the
 * whole value is then allocated once, in the caller's buffer, the other
 * parts are read into it, and it is opened there, the payload moved to the
 * front. The reader's buffer and one reply object (about two parts) are
 * the constant. A value of one part is one round trip, as a GET was.
 *
 * All the parts share one deadline (progcache__redis_clock): the command
 * timeout, extended by the bytes moved at min_rate, for the whole value;
 * a server that drips part after part gets no fresh deadline per part.
 *
 * Parts can tear: another writer may replace the value between two parts.
 * When the envelope check fails on a value read in more than one part, its
 * header is read again: changed, it is a miss that says so (nothing is
 * damaged, the value is newer than the read); unchanged, it is damage. */
#include "store/redis/redis_get.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"

/* 256 KiB: a few round trips for a usual artifact, a small constant. */
#define PART ((size_t)256 << 10)

typedef progcache__redis_store redis_store;
typedef progcache__redis_failure failure;
typedef progcache__redis_reading reading;

static void count(redis_store *s, progcache__remote_counter c)
{
    progcache__remote_count(&s->health, c);
}

size_t progcache__redis_read_limit(const redis_store *s)
{
    uint64_t max = s->cfg.max_artifact_size;
    uint64_t extra = PROGCACHE__ENVELOPE_MAX_HEADER + PROGCACHE_RECORDS_MAX;
    return max > SIZE_MAX / 2 - extra ? SIZE_MAX / 2 : (size_t)(max + extra);
}

size_t progcache__redis_part_size(void)
{
    return PART;
}

/* A value not read: for a get, counted (c, and more when c is REJECTED)
 * and told under cause; for a listing, kept in g->why. */
static void not_read(reading *g, progcache__remote_counter c, progcache__remote_cause cause,
                     const char *fmt, ...) PROGCACHE_PRINTF(4, 5);
static void not_read(reading *g, progcache__remote_counter c, progcache__remote_cause cause,
                     const char *fmt, ...)
{
    char msg[sizeof g->why];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (g->listing) {
        snprintf(g->why, sizeof g->why, "%s", msg);
        return;
    }
    count(g->s, c);
    if (cause == PROGCACHE__CAUSE_TOO_LARGE)
        count(g->s, PROGCACHE__RC_TOO_LARGE);
    if (cause == PROGCACHE__CAUSE_NEWER)
        count(g->s, PROGCACHE__RC_NEWER);
    if (cause == PROGCACHE__CAUSE_BAD_TAG)
        count(g->s, PROGCACHE__RC_BAD_TAG);
    progcache__remote_tell(&g->s->health, &g->s->voice, cause, "%s", msg);
}

static void too_large(reading *g, uint64_t size)
{
    not_read(g, PROGCACHE__RC_REJECTED, PROGCACHE__CAUSE_TOO_LARGE,
             "rejected the value of %s: it holds %llu bytes, more than max_artifact_size (%llu "
             "bytes) allows; treated as a miss (raise max_artifact_size to read it)",
             g->name, (unsigned long long)size, (unsigned long long)g->s->cfg.max_artifact_size);
}

/* The envelope check failed with rc (its message the last error). */
static void failed_check(reading *g, int rc, int bad_tag)
{
    const char *why = progcache_error_last();
    if (rc == PROGCACHE_ENOTFOUND)
        not_read(g, PROGCACHE__RC_MISSES, PROGCACHE__CAUSE_NEWER,
                 "ignored the value of %s: %s; treated as a miss (upgrade progcache here to "
                 "read it)",
                 g->name, why);
    else
        not_read(g, PROGCACHE__RC_REJECTED,
                 bad_tag ? PROGCACHE__CAUSE_BAD_TAG : PROGCACHE__CAUSE_REJECTED,
                 "rejected the value of %s: %s%s", g->name, why,
                 bad_tag ? " (do all nodes use the same secret file?)" : "");
}

static void changed(reading *g)
{
    not_read(g, PROGCACHE__RC_MISSES, PROGCACHE__CAUSE_CHANGED,
             "the value of %s changed while being read (another writer replaced it between "
             "two of its parts); treated as a miss",
             g->name);
}

/* GETRANGE of len bytes from at, on the read's clock, its reply bounded
 * by what was asked for. NULL: failed (f; counted by the call). */
static redisReply *get_range(reading *g, size_t at, size_t len, failure *f)
{
    char from[24], to[24];
    snprintf(from, sizeof from, "%zu", at);
    snprintf(to, sizeof to, "%zu", at + len - 1);
    const char *argv[] = {"GETRANGE", g->name, from, to};
    size_t lens[] = {8, g->name_len, strlen(from), strlen(to)};
    progcache__redis_limit lim = {len + 4096, 8, 1, 0};
    return progcache__redis_call_timed(g->s, 4, argv, lens, 1, &lim, &g->clock, f);
}

/* A part's reply: PROGCACHE_OK (a string of at most len bytes; NIL is read
 * as ""), or PROGCACHE_ENOTFOUND (told). */
static int check_part(reading *g, const redisReply *r, size_t len)
{
    char shape[128];
    progcache__redis_describe(shape, sizeof shape, r);
    if (r->type == REDIS_REPLY_NIL || (r->type == REDIS_REPLY_STRING && r->len <= len))
        return PROGCACHE_OK;
    if (r->type == REDIS_REPLY_STRING)
        snprintf(shape + strlen(shape), sizeof shape - strlen(shape), " (%zu were asked for)",
                 len);
    not_read(g, PROGCACHE__RC_ERRORS, PROGCACHE__CAUSE_PROTOCOL,
             "GETRANGE of %s answered %s, not a string value (another program uses the "
             "prefix?); treated as a miss",
             g->name, shape);
    return PROGCACHE_ENOTFOUND;
}

static size_t part_len(const redisReply *r)
{
    return r->type == REDIS_REPLY_STRING ? (size_t)r->len : 0;
}

/* A call failed: a get's miss (it was counted and told by the call); a
 * listing's error. */
static int call_failed(reading *g, const failure *f)
{
    if (g->listing && f->cause == PROGCACHE__CAUSE_REFUSED) { /* WRONGTYPE: the entry's */
        snprintf(g->why, sizeof g->why, "%s", f->what);
        return PROGCACHE_ENOTFOUND;
    }
    if (g->listing)
        return progcache__redis_remote_error(g->s, "progcache_store_foreach", f);
    return PROGCACHE_ENOTFOUND;
}

/* Read the parts after the first into out->data[at..total). */
static int read_rest(progcache_buf *out, reading *g, size_t at, size_t total)
{
    failure f;
    while (at < total) {
        size_t want = total - at < PART ? total - at : PART;
        redisReply *r = get_range(g, at, want, &f);
        if (!r)
            return call_failed(g, &f);
        int rc = check_part(g, r, want);
        if (!rc && part_len(r) != want) {
            changed(g); /* shorter than its header said: replaced or deleted */
            rc = PROGCACHE_ENOTFOUND;
        }
        if (!rc)
            memcpy(out->data + at, r->str, want);
        freeReplyObject(r);
        if (rc)
            return rc;
        at += want;
        g->parts++;
    }
    return PROGCACHE_OK;
}

/* The check failed on a value of several parts: damage, or a tear? */
static int torn_or_damaged(reading *g, const unsigned char *value, size_t header_len, int rc,
                           int bad_tag)
{
    char saved[512];
    failure f;
    snprintf(saved, sizeof saved, "%s", progcache_error_last());
    redisReply *r = get_range(g, 0, header_len, &f);
    if (!r)
        return call_failed(g, &f);
    int same = r->type == REDIS_REPLY_STRING && (size_t)r->len == header_len &&
               memcmp(r->str, value, header_len) == 0;
    freeReplyObject(r);
    if (!same) {
        changed(g);
        return PROGCACHE_ENOTFOUND;
    }
    progcache__error(rc, "%s", saved);
    failed_check(g, rc, bad_tag);
    return PROGCACHE_ENOTFOUND;
}

int progcache__redis_read(progcache_buf *out, progcache__envelope *e, reading *g)
{
    failure f;
    uint64_t total = 0, size = 0;
    size_t header_len = 0;
    int rc;
    progcache__redis_clock_start(&g->clock);
    g->parts = 1;
    g->why[0] = '\0';
    redisReply *r = get_range(g, 0, PART, &f);
    if (!r)
        return call_failed(g, &f);
    if ((rc = check_part(g, r, PART))) {
        freeReplyObject(r);
        return rc;
    }
    size_t first = part_len(r);
    progcache__error_saved saved;
    progcache__error_save(&saved);
    if (first == 0) { /* GETRANGE of a key that is not there */
        freeReplyObject(r);
        progcache__error_restore(&saved);
        if (!g->listing)
            count(g->s, PROGCACHE__RC_MISSES);
        return PROGCACHE_ENOTFOUND;
    }
    /* A whole part: the value may go on. Its length, from its header,
     * before allocating it. A short part is the whole value. */
    total = first;
    if (first == PART) {
        rc = progcache__envelope_length(&total, &size, &header_len, r->str, first);
        if (rc) {
            failed_check(g, rc, 0);
        } else if (size > g->s->cfg.max_artifact_size ||
                   total > progcache__redis_read_limit(g->s)) {
            too_large(g, size);
            rc = PROGCACHE_ENOTFOUND;
        }
        if (rc) {
            freeReplyObject(r);
            progcache__error_restore(&saved);
            return PROGCACHE_ENOTFOUND;
        }
        if (total < first)
            total = first; /* damage: open says how */
    }
    rc = progcache__buf_reserve(out, (size_t)total);
    if (!rc) {
        memcpy(out->data, r->str, first);
        out->size = 0; /* no NUL written: the value is there */
    }
    freeReplyObject(r);
    if (!rc)
        rc = read_rest(out, g, first, (size_t)total);
    if (rc) {
        if (rc == PROGCACHE_ENOTFOUND)
            progcache__error_restore(&saved);
        else
            progcache__error_discard(&saved);
        return rc;
    }
    rc = progcache__envelope_open(e, out->data, (size_t)total, &g->id, g->hmac);
    if (rc == PROGCACHE_ECORRUPT && g->parts > 1) {
        rc = torn_or_damaged(g, out->data, header_len, rc, e->bad_tag);
    } else if (rc) {
        failed_check(g, rc, e->bad_tag);
        rc = PROGCACHE_ENOTFOUND;
    } else if (e->size > g->s->cfg.max_artifact_size) {
        too_large(g, e->size); /* a short value of one part */
        rc = PROGCACHE_ENOTFOUND;
    }
    if (rc == PROGCACHE_ENOTFOUND)
        progcache__error_restore(&saved);
    else
        progcache__error_discard(&saved);
    return rc;
}

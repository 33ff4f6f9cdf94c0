/* One command on one connection, with a bound on its reply and a deadline
 * on the whole exchange (redis_store.h; docs/SECURITY.md, "A hostile
 * server").
 *
 * The server is not trusted to be sane. hiredis's reader would allocate
 * whatever a reply announces: an array of 50,000,000 elements, a status
 * line that never ends, a bulk string of 9,999,999,999 bytes fed for as
 * long as the server likes. So every connection's reader builds its replies
 * through the functions below (its redisReplyObjectFunctions), which check
 * each array's element count and nesting depth and each object's size
 * against the command's bound BEFORE allocating it, and the read loop
 * checks the bytes waiting unparsed in the reader, and the length a bulk
 * string announces, before reading more. A reply over its bound ends the
 * command (the connection is out of step with the server and is dropped).
 *
 * The deadline is for the whole command, not for each read: a server that
 * sends one byte every 20 ms never lets a per-read timeout run out. It is
 * command_timeout_ms, extended by the bytes actually moved at min_rate
 * bytes per second, so a large value on a fast enough link is never cut,
 * while a drip ends within about command_timeout_ms. The socket is
 * non-blocking and every read and write waits in poll() for what is left. */
#include "store/redis/redis_store.h"

#include <errno.h>
#include <fcntl.h>
#include <hiredis/sds.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef progcache__redis_failure failure;
typedef progcache__redis_budget budget;

/* A reader buffer grown past this by one reply is given back at once
 * rather than kept in a pooled connection. */
#define KEEP_BUFFER (64u * 1024u)

const progcache__redis_limit progcache__redis_small = {4096, 8, 1, 0};
const progcache__redis_limit progcache__redis_page = {(size_t)32 << 20, (size_t)1 << 17, 2, 0};
const progcache__redis_limit progcache__redis_info = {(size_t)1 << 20, 8, 1, 0};

/* ---- describing a reply ------------------------------------------------- */

static void printable(char *out, size_t size, const char *s, size_t len)
{
    size_t n = len < size - 1 ? len : size - 1;
    for (size_t i = 0; i < n; i++)
        out[i] = s[i] >= 0x20 && s[i] <= 0x7e ? s[i] : '?';
    out[n] = '\0';
}

void progcache__redis_describe(char *out, size_t size, const redisReply *r)
{
    char text[64];
    if (!r) {
        snprintf(out, size, "nothing");
        return;
    }
    switch (r->type) {
    case REDIS_REPLY_STRING:
        snprintf(out, size, "a bulk string of %zu byte%s", (size_t)r->len, r->len == 1 ? "" : "s");
        break;
    case REDIS_REPLY_ARRAY:
        snprintf(out, size, "an array of %zu element%s", (size_t)r->elements,
                 r->elements == 1 ? "" : "s");
        break;
    case REDIS_REPLY_INTEGER:
        snprintf(out, size, "the integer %lld", r->integer);
        break;
    case REDIS_REPLY_NIL:
        snprintf(out, size, "nil");
        break;
    case REDIS_REPLY_STATUS:
        printable(text, sizeof text, r->str, r->len);
        snprintf(out, size, "the status \"%s\"", text);
        break;
    case REDIS_REPLY_ERROR:
        printable(text, sizeof text, r->str, r->len);
        snprintf(out, size, "the error \"%s\"", text);
        break;
    default:
        snprintf(out, size, "a reply of type %d", r->type);
    }
}

/* ---- building replies within the bound ---------------------------------- */

/* Charge cost bytes to the reply; 0, or -1 with the bound broken. */
static int charge(budget *b, size_t cost, const char *what)
{
    if (cost <= b->lim->bytes && b->used <= b->lim->bytes - cost) {
        b->used += cost;
        return 0;
    }
    if (!b->broke)
        snprintf(b->why, sizeof b->why, "%s, more than its bound of %zu bytes", what,
                 b->lim->bytes);
    b->broke = 1;
    return -1;
}

/* A reply object of type, attached to its parent array (as hiredis's own
 * functions do), or NULL. Allocated with calloc: freeReplyObject frees it. */
static redisReply *attach(const redisReadTask *task, int type, size_t extra, const char *what)
{
    budget *b = task->privdata;
    if (!b || charge(b, sizeof(redisReply) + extra, what))
        return NULL;
    redisReply *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->type = type;
    if (task->parent) {
        redisReply *parent = task->parent->obj;
        parent->element[task->idx] = r;
    }
    return r;
}

static void *create_string(const redisReadTask *task, char *str, size_t len)
{
    char what[96];
    snprintf(what, sizeof what, "a string of %zu bytes", len);
    redisReply *r = attach(task, task->type, len + 1, what);
    if (!r)
        return NULL;
    if (!(r->str = malloc(len + 1))) {
        freeReplyObject(r); /* detached below: the parent's slot is cleared */
        if (task->parent)
            ((redisReply *)task->parent->obj)->element[task->idx] = NULL;
        return NULL;
    }
    memcpy(r->str, str, len);
    r->str[len] = '\0';
    r->len = len;
    return r;
}

/* hiredis 1 counts elements in a size_t, 0.14 in an int. */
#if HIREDIS_MAJOR >= 1
typedef size_t element_count;
#else
typedef int element_count;
#endif

static void *create_array(const redisReadTask *task, element_count count)
{
    long long elements = (long long)count;
    budget *b = task->privdata;
    unsigned int depth = 1;
    for (const redisReadTask *t = task->parent; t; t = t->parent)
        depth++;
    if (b && !b->broke && (size_t)elements > b->lim->elements) {
        snprintf(b->why, sizeof b->why, "an array of %lld elements, more than its bound of %zu",
                 elements, b->lim->elements);
        b->broke = 1;
    } else if (b && !b->broke && depth > b->lim->depth) {
        snprintf(b->why, sizeof b->why, "arrays nested %u deep, more than its bound of %u", depth,
                 b->lim->depth);
        b->broke = 1;
    }
    if (!b || b->broke)
        return NULL;
    char what[96];
    snprintf(what, sizeof what, "an array of %lld elements", elements);
    size_t n = elements > 0 ? (size_t)elements : 0;
    redisReply *r = attach(task, REDIS_REPLY_ARRAY, n * sizeof(redisReply *), what);
    if (!r)
        return NULL;
    if (n && !(r->element = calloc(n, sizeof *r->element))) {
        if (task->parent)
            ((redisReply *)task->parent->obj)->element[task->idx] = NULL;
        free(r);
        return NULL;
    }
    r->elements = n;
    return r;
}

static void *create_integer(const redisReadTask *task, long long value)
{
    redisReply *r = attach(task, REDIS_REPLY_INTEGER, 0, "one more integer");
    if (r)
        r->integer = value;
    return r;
}

static void *create_nil(const redisReadTask *task)
{
    return attach(task, REDIS_REPLY_NIL, 0, "one more nil");
}

#if HIREDIS_MAJOR >= 1
/* RESP3 types: the store never asks for them (it never sends HELLO 3). */
static void *create_double(const redisReadTask *task, double d, char *s, size_t len)
{
    (void)d, (void)s, (void)len;
    budget *b = task->privdata;
    if (b && !b->broke)
        snprintf(b->why, sizeof b->why, "a RESP3 double, which it never asks for");
    if (b)
        b->broke = 1;
    return NULL;
}

static void *create_bool(const redisReadTask *task, int v)
{
    return create_double(task, v, NULL, 0);
}
#endif

static redisReplyObjectFunctions bounded_functions = {
    .createString = create_string,
    .createArray = create_array,
    .createInteger = create_integer,
    .createNil = create_nil,
#if HIREDIS_MAJOR >= 1
    .createDouble = create_double,
    .createBool = create_bool,
#endif
    .freeObject = freeReplyObject,
};

int progcache__redis_bound_reader(redisContext *c)
{
    c->reader->fn = &bounded_functions;
    c->reader->privdata = NULL;
    int flags = fcntl(c->fd, F_GETFL);
    return flags < 0 || fcntl(c->fd, F_SETFL, flags | O_NONBLOCK) != 0 ? -1 : 0;
}

/* The reader's task in progress, or NULL (hiredis 1 keeps pointers). */
static const redisReadTask *current_task(const redisReader *r)
{
    if (r->ridx < 0)
        return NULL;
#if HIREDIS_MAJOR >= 1
    return r->task[r->ridx];
#else
    return &r->rstack[r->ridx];
#endif
}

/* Check what waits unparsed in the reader: its size, and the length a
 * bulk string in progress announces (its "$<len>\r\n" line is complete
 * long before its bytes are). 0, or -1 with the bound broken (*value: it
 * was a value of a GET, larger than the command reads). */
static int check_waiting(const redisReader *r, budget *b, int *value)
{
    size_t waiting = r->len - r->pos;
    const redisReadTask *t = current_task(r);
    *value = 0;
    if (t && t->type == REDIS_REPLY_STRING) {
        const char *p = r->buf + r->pos, *end = r->buf + r->len;
        unsigned long long n = 0;
        int digits = 0;
        for (; p < end && *p >= '0' && *p <= '9' && n < (1ull << 60); p++, digits++)
            n = n * 10 + (unsigned long long)(*p - '0');
        if (digits && (p == end || *p == '\r' || n >= (1ull << 60)) &&
            n + sizeof(redisReply) + 1 > b->lim->bytes - b->used) {
            *value = b->lim->value && !t->parent;
            snprintf(b->why, sizeof b->why,
                     "a bulk string of %llu bytes%s, more than its bound of %zu bytes", n,
                     p == end || n >= (1ull << 60) ? " or more" : "", b->lim->bytes);
            b->broke = 1;
            return -1;
        }
    }
    if (waiting > b->lim->bytes) {
        *value = b->lim->value && t && t->type == REDIS_REPLY_STRING && !t->parent;
        snprintf(b->why, sizeof b->why,
                 "%zu bytes of one reply and no end yet, more than its bound of %zu bytes",
                 waiting, b->lim->bytes);
        b->broke = 1;
        return -1;
    }
    return 0;
}

/* ---- the exchange, within its deadline ---------------------------------- */

static uint64_t deadline_of(const progcache__redis_config *cfg, uint64_t start, size_t moved)
{
    return start + cfg->command_timeout_ms + (uint64_t)moved * 1000u / cfg->min_rate;
}

/* Wait for fd to be ready for events until deadline (monotonic ms).
 * 1 ready, 0 the deadline passed, -1 poll failed. */
static int wait_fd(int fd, short events, uint64_t deadline)
{
    for (;;) {
        uint64_t now = progcache__remote_now_ms();
        if (now >= deadline)
            return 0;
        uint64_t left = deadline - now;
        struct pollfd p = {fd, events, 0};
        int n = poll(&p, 1, left > 60000 ? 60000 : (int)left);
        if (n > 0)
            return 1;
        if (n < 0 && errno != EINTR)
            return -1;
    }
}

static void lost(failure *f, const char *cmd, const redisContext *c)
{
    f->cause = PROGCACHE__CAUSE_LOST;
    f->lost = c->err == REDIS_ERR_EOF || (c->err == REDIS_ERR_IO &&
                                          (errno == ECONNRESET || errno == EPIPE));
    snprintf(f->what, sizeof f->what, "%s failed: %s", cmd, c->errstr[0] ? c->errstr : "I/O error");
}

static void timed_out(failure *f, const progcache__redis_config *cfg, const char *cmd,
                      uint64_t start, size_t moved)
{
    f->timeout = f->deadline = 1;
    f->cause = PROGCACHE__CAUSE_TIMEOUT;
    snprintf(f->what, sizeof f->what,
             "%s failed: no complete reply within its deadline of %llu ms (command timeout: "
             "command_timeout_ms %u, extended for %zu bytes moved at min_rate %llu bytes/s)",
             cmd, (unsigned long long)(deadline_of(cfg, start, moved) - start),
             cfg->command_timeout_ms, moved, (unsigned long long)cfg->min_rate);
}

static void over(failure *f, const budget *b, const char *cmd, int value)
{
    f->cause = PROGCACHE__CAUSE_BOUND;
    f->too_large = value;
    f->over_bound = !value;
    snprintf(f->what, sizeof f->what, "%s answered %s; the connection was dropped", cmd, b->why);
}

/* clock: the operation's start and the bytes its earlier commands moved
 * (one deadline for several commands); this command's bytes are added. */
static redisReply *exchange(const progcache__redis_config *cfg, redisContext *c, int argc,
                            const char **argv, const size_t *lens, budget *b,
                            progcache__redis_clock *clock, failure *f)
{
    uint64_t start = clock->start;
    size_t moved = clock->moved;
    int done = 0, ready, value;
    if (redisAppendCommandArgv(c, argc, argv, lens) != REDIS_OK) {
        snprintf(f->what, sizeof f->what, "%s failed: %s", argv[0], c->errstr);
        return NULL;
    }
    while (!done) {
        size_t before = sdslen(c->obuf);
        if ((ready = wait_fd(c->fd, POLLOUT, deadline_of(cfg, start, moved))) <= 0)
            goto stopped;
        if (redisBufferWrite(c, &done) != REDIS_OK) {
            lost(f, argv[0], c);
            return NULL;
        }
        moved += before - (done ? 0 : sdslen(c->obuf));
    }
    for (;;) {
        void *reply = NULL;
        if (redisGetReplyFromReader(c, &reply) != REDIS_OK) {
            if (b->broke)
                over(f, b, argv[0], 0);
            else {
                f->cause = PROGCACHE__CAUSE_PROTOCOL;
                snprintf(f->what, sizeof f->what, "%s answered what is not RESP (%s)", argv[0],
                         c->errstr);
            }
            return NULL;
        }
        if (reply) {
            clock->moved = moved;
            return reply;
        }
        if (check_waiting(c->reader, b, &value)) {
            over(f, b, argv[0], value);
            return NULL;
        }
        if ((ready = wait_fd(c->fd, POLLIN, deadline_of(cfg, start, moved))) <= 0)
            goto stopped;
        size_t had = c->reader->len;
        if (redisBufferRead(c) != REDIS_OK) {
            lost(f, argv[0], c);
            return NULL;
        }
        moved += c->reader->len - had;
    }
stopped:
    if (ready == 0)
        timed_out(f, cfg, argv[0], start, moved);
    else
        snprintf(f->what, sizeof f->what, "%s failed: poll: %s", argv[0], strerror(errno));
    return NULL;
}

redisReply *progcache__redis_command(const progcache__redis_config *cfg, redisContext *c,
                                     int argc, const char **argv, const size_t *lens,
                                     const progcache__redis_limit *lim, failure *f)
{
    return progcache__redis_command_timed(cfg, c, argc, argv, lens, lim, NULL, f);
}

void progcache__redis_clock_start(progcache__redis_clock *clock)
{
    clock->start = progcache__remote_now_ms();
    clock->moved = 0;
}

redisReply *progcache__redis_command_timed(const progcache__redis_config *cfg, redisContext *c,
                                           int argc, const char **argv, const size_t *lens,
                                           const progcache__redis_limit *lim,
                                           progcache__redis_clock *clock, failure *f)
{
    progcache__redis_clock own;
    if (!clock) {
        progcache__redis_clock_start(&own);
        clock = &own;
    }
    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    budget b = {lim, 0, 0, ""};
    f->timeout = f->deadline = f->too_large = f->over_bound = f->lost = 0;
    f->cause = PROGCACHE__CAUSE_LOST;
    c->reader->privdata = &b;
    redisReply *r = exchange(cfg, c, argc, argv, lens, &b, clock, f);
    c->reader->privdata = NULL;
    /* A large reply's buffer is not kept for the next command. */
    if (r && c->reader->len == 0 && sdsavail(c->reader->buf) > KEEP_BUFFER) {
        sdsfree(c->reader->buf);
        c->reader->buf = sdsempty();
        c->reader->pos = 0;
    }
    if (!r && !sigismember(&old, SIGPIPE)) {
        sigset_t pending;
        struct timespec zero = {0, 0};
        if (sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE))
            sigtimedwait(&pipe_set, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return r;
}

int progcache__redis_await(redisContext *c, budget *b, unsigned int ms)
{
    int got = 0, polled = 0, value;
    c->reader->privdata = b;
    for (;;) {
        void *reply = NULL;
        if (redisGetReplyFromReader(c, &reply) != REDIS_OK)
            return -1;
        if (reply) {
            got = 1;
            freeReplyObject(reply);
            b->used = 0; /* the bound is per message */
            continue;
        }
        if (check_waiting(c->reader, b, &value))
            return -1;
        if (polled || got)
            return got;
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        int n = poll(&p, 1, (int)ms);
        if (n < 0 && errno != EINTR)
            return -1;
        if (n <= 0)
            return 0;
        if (redisBufferRead(c) != REDIS_OK)
            return -1;
        polled = 1;
    }
}

/* A Redis server that lies (docs/SECURITY.md, "A hostile server"): for
 * every hostile mode (hostile_server.h) and every class of command the
 * tier sends (a lookup through a cache, a put, the handshake's AUTH,
 * `progcache remote`, a lease wait), the call must end as a miss or a
 * clear failure, never a hit; within its deadline (a generous bound: 100 ms
 * command timeouts against seconds here); and without memory growing past
 * a small multiple of the bound (ru_maxrss, measured in a child process
 * that does nothing else). */
#include <fcntl.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "hostile_server.h"
#include "progcache/cache.h"
#include "redis_fixture.h"

/* The artifact bound of every cache here: every GET reads at most about
 * 2 MiB (this, the envelope, the largest records). */
#define MAX_ARTIFACT ((uint64_t)1 << 20)
/* What any call may add to the peak RSS: far below what the hostile
 * replies announce (GiBs), well above the bound (sanitizer builds keep
 * freed memory in quarantine). */
#define RSS_SLACK_KB (64L * 1024)
#define TIME_BOUND_MS 4000.0

static char *scratch;

typedef struct outcome {
    int rc;
    double ms;
    long rss_kb; /* growth of the child's peak RSS during the call */
    int hit;     /* a lookup returned bytes: never allowed */
    uint64_t over_bound, deadlines; /* the cache's statistics after the call */
} outcome;

typedef enum op_class { OP_GET, OP_PUT, OP_AUTH, OP_WAIT, OP_MESSAGES, OP_CLASSES } op_class;
static const char *const class_names[] = {"lookup", "put", "auth", "lease wait", "messages"};
/* A lookup reads a value in parts with GETRANGE (redis_get.c). */
static const char *const class_commands[] = {"GETRANGE", "SET", "AUTH", "EVAL SUBSCRIBE",
                                             "MESSAGE"};

static long peak_kb(void)
{
    struct rusage ru;
    CHECK(getrusage(RUSAGE_SELF, &ru) == 0);
    return ru.ru_maxrss;
}

static void say(void *ctx, int level, const char *message)
{
    (void)ctx;
    fprintf(stderr, "    log %d: %s\n", level, message);
}

static progcache *open_cache(const char *url, int n)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/cache%d", scratch, n);
    progcache_redis_options ro = PROGCACHE_REDIS_OPTIONS_INIT;
    ro.url = url;
    ro.flags = PROGCACHE_REDIS_SYNC_PUT; /* the write happens in the call measured */
    progcache_options o = PROGCACHE_OPTIONS_INIT;
    o.remote = &ro;
    o.max_artifact_size = MAX_ARTIFACT;
    if (getenv("HOSTILE_LOG"))
        o.log = say;
    progcache *c = NULL;
    CHECK_OK(progcache_open(&c, dir, &o));
    return c;
}

/* The call of class on a server at url, in this (child) process. */
static void call(outcome *out, op_class cls, const char *url, int n)
{
    static char value[4096];
    memset(value, 'v', sizeof value);
    char auth_url[128];
    snprintf(auth_url, sizeof auth_url, "redis://:pw@%s", url + strlen("redis://"));
    progcache *c = NULL;
    progcache_store *s = NULL;
    if (cls == OP_WAIT || cls == OP_MESSAGES) {
        progcache_redis_options ro = PROGCACHE_REDIS_OPTIONS_INIT;
        ro.url = url;
        CHECK_OK(progcache_store_redis_new(&s, &ro));
    } else {
        c = open_cache(cls == OP_AUTH ? auth_url : url, n);
    }
    progcache_buf buf = PROGCACHE_BUF_INIT;
    long before = peak_kb();
    double t0 = test_now_ms();
    switch (cls) {
    case OP_GET:
    case OP_AUTH:
        out->rc = progcache_get(&buf, c, "key", 3);
        out->hit = out->rc == PROGCACHE_OK || buf.size != 0;
        break;
    case OP_PUT:
        out->rc = progcache_put(c, "key", 3, value, sizeof value);
        break;
    case OP_WAIT:
    case OP_MESSAGES:
        out->rc = progcache_store_lease_wait(s, "key", 3, 1000);
        break;
    default:
        break;
    }
    out->ms = test_now_ms() - t0;
    out->rss_kb = peak_kb() - before;
    if (c) {
        progcache_stats st = PROGCACHE_STATS_INIT;
        progcache_flush(c); /* what is still being written is counted too */
        CHECK_OK(progcache_stats_get(&st, c));
        out->over_bound = st.remote_over_bound;
        out->deadlines = st.remote_deadlines;
    } else {
        progcache_redis_counters rc = test_redis_counters(s);
        out->over_bound = rc.over_bound;
        out->deadlines = rc.deadlines;
    }
    progcache_buf_free(&buf);
    progcache_close(c);
    progcache_store_free(s);
}

typedef struct call_args {
    op_class cls;
    const char *url;
    int n;
} call_args;

static void call_in_child(void *ctx, void *out)
{
    const call_args *a = ctx;
    call(out, a->cls, a->url, a->n);
}

static outcome in_child(op_class cls, const char *url, int n)
{
    call_args a = {cls, url, n};
    outcome o = {0};
    test_in_child(call_in_child, &a, &o, sizeof o);
    return o;
}

static void check_outcome(const outcome *o, op_class cls, hostile_mode mode)
{
    fprintf(stderr, "  %-10s %-11s rc %d, %.0f ms, +%ld KiB, over bound %llu, deadlines %llu\n",
            class_names[cls],
            hostile_mode_name(mode), o->rc, o->ms, o->rss_kb, (unsigned long long)o->over_bound,
            (unsigned long long)o->deadlines);
    CHECK(!o->hit);
    CHECK(o->ms < TIME_BOUND_MS);
    CHECK(o->rss_kb < RSS_SLACK_KB);
    if (cls == OP_GET || cls == OP_AUTH)
        CHECK(o->rc == PROGCACHE_ENOTFOUND); /* a miss */
    else if (cls == OP_PUT)
        CHECK(o->rc == PROGCACHE_OK); /* the local put stands; the remote write failed */
    else
        CHECK(o->rc != PROGCACHE_OK); /* no entry appeared: never "stored" */
    /* Counted in `progcache stats` (remote_over_bound, remote_deadlines). */
    /* A GETRANGE's reply is bounded by the part it asked for: a huge bulk
     * string breaks it as it breaks any other reply's. */
    if (cls < OP_WAIT &&
        (mode == HOSTILE_HUGE_ARRAY || mode == HOSTILE_DEEP || mode == HOSTILE_HUGE_BULK))
        CHECK(o->over_bound >= 1);
    /* A subscription's messages have their bound too. */
    if (cls == OP_MESSAGES && (mode == HOSTILE_HUGE_ARRAY || mode == HOSTILE_DEEP ||
                               mode == HOSTILE_HUGE_BULK))
        CHECK(o->over_bound == 1);
    if (cls < OP_WAIT && mode == HOSTILE_STALL)
        CHECK(o->deadlines >= 1);
    /* A drip of a bulk string: the deadline, or first the bound its length
     * breaks once enough of its digits came. */
    if (cls < OP_WAIT && mode == HOSTILE_DRIP)
        CHECK(o->deadlines + o->over_bound >= 1);
}

static void test_matrix(void)
{
    int n = 0;
    for (int cls = 0; cls < OP_CLASSES; cls++)
        for (int mode = 0; mode < HOSTILE_MODES; mode++) {
            hostile_server h;
            hostile_start(&h, (hostile_mode)mode, class_commands[cls]);
            outcome o = in_child((op_class)cls, h.url, n++);
            hostile_stop(&h);
            check_outcome(&o, (op_class)cls, (hostile_mode)mode);
        }
}

/* `progcache remote` against each mode on every command: exit 1 (not
 * usable) or 0 (only INFO, which is optional, failed), never a signal;
 * bounded in time and in its own peak RSS (wait4), against a sane run. */
static long run_tool(const char *url, int *status, double *ms, char *err, size_t err_size)
{
    const char *bin = getenv("PROGCACHE_BIN");
    CHECK(bin != NULL);
    char err_path[4096];
    snprintf(err_path, sizeof err_path, "%s/tool.err", scratch);
    double t0 = test_now_ms();
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int z = open("/dev/null", O_WRONLY);
        if (e < 0 || z < 0 || dup2(z, 1) < 0 || dup2(e, 2) < 0)
            _exit(127);
        unsetenv("PROGCACHE_REMOTE_SECRET_FILE");
        execl(bin, bin, "remote", "--url", url, (char *)NULL);
        _exit(127);
    }
    struct rusage ru;
    CHECK(wait4(pid, status, 0, &ru) == pid);
    *ms = test_now_ms() - t0;
    size_t n;
    char *text = test_read_file(err_path, &n);
    CHECK(text != NULL);
    snprintf(err, err_size, "%s", text);
    free(text);
    return ru.ru_maxrss;
}

static void test_tool(void)
{
    hostile_server h;
    char err[4096];
    int status;
    double ms;
    hostile_start(&h, HOSTILE_ERROR, "NOTHING");
    long sane = run_tool(h.url, &status, &ms, err, sizeof err);
    hostile_stop(&h);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    for (int mode = 0; mode < HOSTILE_MODES; mode++) {
        hostile_start(&h, (hostile_mode)mode, "*");
        long rss = run_tool(h.url, &status, &ms, err, sizeof err);
        hostile_stop(&h);
        fprintf(stderr, "  remote     %-11s status %d, %.0f ms, %ld KiB (sane %ld)\n",
                hostile_mode_name((hostile_mode)mode), status, ms, rss, sane);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 1);
        CHECK(ms < TIME_BOUND_MS);
        CHECK(rss < sane + RSS_SLACK_KB);
        if (mode == HOSTILE_WRONG_TYPE)
            CHECK(strstr(err, "PING answered an array of 3 elements, not PONG"));
        if (mode == HOSTILE_HUGE_ARRAY)
            CHECK(strstr(err, "PING answered an array of 50000000 elements, more than its bound"));
        if (mode == HOSTILE_HUGE_BULK)
            CHECK(strstr(err, "PING answered a bulk string of 9999999999 bytes"));
        if (mode == HOSTILE_DEEP)
            CHECK(strstr(err, "nested 2 deep, more than its bound of 1"));
        /* A stall ends at the deadline. A drip does too, or, when the
         * machine is loaded and more of its bytes are in by then, at the
         * bound of the reply it announces: either is said, in time. */
        if (mode == HOSTILE_STALL)
            CHECK(strstr(err, "deadline"));
        if (mode == HOSTILE_DRIP)
            CHECK(strstr(err, "deadline") || strstr(err, "more than its bound"));
    }
    /* Only INFO lies: the tier is still usable. */
    hostile_start(&h, HOSTILE_HUGE_BULK, "INFO");
    run_tool(h.url, &status, &ms, err, sizeof err);
    hostile_stop(&h);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* A SCAN page too large ends `progcache remote` with the bound named. */
    hostile_start(&h, HOSTILE_HUGE_ARRAY, "SCAN");
    run_tool(h.url, &status, &ms, err, sizeof err);
    hostile_stop(&h);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    CHECK(strstr(err, "SCAN answered an array of 50000000 elements, more than its bound"));
}

/* The store's messages and counters for the hostile replies. */
static void test_messages(void)
{
    struct {
        hostile_mode mode;
        const char *fragment;
    } cases[] = {
        {HOSTILE_WRONG_TYPE, "GETRANGE of progcache:"},
        {HOSTILE_HUGE_ARRAY,
         "GETRANGE answered an array of 50000000 elements, more than its bound of 8"},
        {HOSTILE_DEEP, "GETRANGE answered arrays nested 2 deep, more than its bound of 1"},
        {HOSTILE_GARBAGE, "GETRANGE answered what is not RESP"},
        {HOSTILE_DRIP, "no complete reply within its deadline"},
        /* The part asked for (256 KiB) and 4 KiB more. */
        {HOSTILE_HUGE_BULK, "GETRANGE answered a bulk string of 9999999999 bytes, more than its "
                            "bound of 266240 bytes"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hostile_server h;
        hostile_start(&h, cases[i].mode, "GETRANGE");
        log_capture log = LOG_CAPTURE_INIT;
        progcache_redis_options ro = PROGCACHE_REDIS_OPTIONS_INIT;
        ro.url = h.url;
        ro.max_artifact_size = MAX_ARTIFACT;
        ro.log = test_log_capture;
        ro.log_ctx = &log;
        progcache_store *s = NULL;
        CHECK_OK(progcache_store_redis_new(&s, &ro));
        progcache_buf buf = PROGCACHE_BUF_INIT;
        CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_get(&buf, s, "key", 3));
        progcache_redis_counters c = test_redis_counters(s);
        fprintf(stderr, "  message    %-11s %s\n", hostile_mode_name(cases[i].mode), log.last);
        CHECK(strstr(log.last, cases[i].fragment));
        if (cases[i].mode == HOSTILE_HUGE_ARRAY || cases[i].mode == HOSTILE_DEEP ||
            cases[i].mode == HOSTILE_HUGE_BULK)
            CHECK(c.over_bound == 1 && c.errors == 1);
        if (cases[i].mode == HOSTILE_DRIP)
            CHECK(c.deadlines == 1 && c.timeouts == 1);
        if (cases[i].mode == HOSTILE_WRONG_TYPE)
            CHECK(strstr(log.last, "answered an array of 3 elements, not a string value"));
        progcache_buf_free(&buf);
        progcache_store_free(s);
        hostile_stop(&h);
    }
}

/* The deadline's rate comes from the setting remote_min_rate
 * (PROGCACHE_REMOTE_MIN_RATE) through progcache_open, and says so, at each
 * of its three entrances: the caller's Redis options, a URL in the options
 * (which once ignored it: issue 33), and $PROGCACHE_REMOTE. */
static void test_min_rate_setting(void)
{
    hostile_server h;
    hostile_start(&h, HOSTILE_DRIP, "GETRANGE");
    setenv("PROGCACHE_REMOTE_MIN_RATE", "2MiB", 1);
    for (int entrance = 0; entrance < 3; entrance++) {
        log_capture log = LOG_CAPTURE_INIT;
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/rate%d", scratch, entrance);
        progcache_redis_options ro = PROGCACHE_REDIS_OPTIONS_INIT;
        ro.url = h.url;
        progcache_options o = PROGCACHE_OPTIONS_INIT;
        if (entrance == 0)
            o.remote = &ro;
        else if (entrance == 1)
            o.remote_url = h.url;
        else
            setenv("PROGCACHE_REMOTE", h.url, 1);
        o.log = test_log_capture;
        o.log_ctx = &log;
        progcache *c = NULL;
        CHECK_OK(progcache_open(&c, dir, &o));
        progcache_buf buf = PROGCACHE_BUF_INIT;
        CHECK_RC(PROGCACHE_ENOTFOUND, progcache_get(&buf, c, "key", 3));
        fprintf(stderr, "  entrance %d: %s\n", entrance, log.last);
        CHECK(strstr(log.last, "min_rate 2097152 bytes/s"));
        progcache_close(c);
        progcache_buf_free(&buf);
        unsetenv("PROGCACHE_REMOTE");
    }
    unsetenv("PROGCACHE_REMOTE_MIN_RATE");
    hostile_stop(&h);
}

int main(void)
{
    test_redis_require();
    scratch = test_mkdtemp("hostile");
    test_messages();
    test_min_rate_setting();
    test_matrix();
    test_tool();
    test_rmtree(scratch);
    free(scratch);
    return 0;
}

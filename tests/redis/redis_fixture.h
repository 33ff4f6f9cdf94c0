/* A private redis-server for a test, and a tiny raw client to look at (and
 * damage) what the store wrote.
 *
 * Each test starts its own server on a free loopback port, with no
 * persistence, in a temporary directory (which also holds a unix socket).
 * The server never outlives the test: it is killed at exit, on abort()
 * (a failed CHECK), and by the kernel when the test dies any other way
 * (PR_SET_PDEATHSIG). The raw client is written against plain sockets, so
 * the tests build and report SKIPPED the same way without hiredis. */
#ifndef PROGCACHE_TEST_REDIS_FIXTURE_H
#define PROGCACHE_TEST_REDIS_FIXTURE_H

#include <pthread.h>
#include <stddef.h>
#include <sys/types.h>

#include "progcache/remote.h"

typedef struct test_redis {
    pid_t pid;          /* 0 when not running */
    int port;
    char *dir;          /* the server's directory (socket, log) */
    char sock[512];     /* unix socket path */
    char url[256];      /* redis://127.0.0.1:PORT (with password, if any) */
    char unix_url[600]; /* unix:SOCK */
    const char *password; /* requirepass, or NULL */
    int db;             /* database the raw client selects */
} test_redis;

/* Exit 77 (SKIPPED, with the reason on stderr) when this build has no
 * hiredis or no redis-server can be found ($PROGCACHE_REDIS_SERVER, PATH,
 * /usr/sbin, /usr/bin). */
void test_redis_require(void);

/* Start a server (password: NULL or a requirepass). CHECK-fails on error. */
void test_redis_start(test_redis *r, const char *password);
/* Kill the server and remove its directory. Safe to call twice. */
void test_redis_stop(test_redis *r);
/* SIGKILL the server, keeping port and directory for a restart. */
void test_redis_kill(test_redis *r);
/* Start it again on the same port (empty: no persistence). */
void test_redis_restart(test_redis *r);
/* SIGSTOP / SIGCONT the server (a server that stops answering). */
void test_redis_pause(test_redis *r);
void test_redis_resume(test_redis *r);

/* A free loopback TCP port, with nothing listening on it right now. */
int test_free_port(void);

/* Write all of data to a socket (EINTR retried, no SIGPIPE); -1 once the
 * peer is gone. */
int test_send_all(int fd, const void *data, size_t len);

/* A reply from the raw client (RESP2). */
typedef struct test_reply {
    char type; /* '+', '-', ':', '$' (str set; NULL = nil), '*' */
    long long integer;
    char *str;
    size_t len;
    size_t elements;
    struct test_reply **element;
} test_reply;

/* Run one command on a new connection (after AUTH and SELECT as r says);
 * NULL when the server cannot be reached. lens NULL: strlen of each arg. */
test_reply *test_redis_cmd(const test_redis *r, int argc, const char **argv,
                           const size_t *lens);

/* The number after "<field>:" in the server's INFO <section> (checked to
 * be there). */
long long test_redis_info(const test_redis *r, const char *section, const char *field);
void test_reply_free(test_reply *reply);

/* Shorthands that CHECK-fail when the server cannot be reached. */
long long test_redis_int(const test_redis *r, int argc, const char **argv);
/* GET name into a malloc'd buffer; NULL for nil. */
char *test_redis_get(const test_redis *r, const char *name, size_t *len);
void test_redis_set(const test_redis *r, const char *name, const void *value, size_t len);

/* "<prefix><hex SHA-256(key)>": the Redis name the store uses for key. */
void test_redis_name(char *out, size_t size, const char *prefix, const void *key,
                     size_t key_len);

/* Run fn(ctx, out) in a child process, which hands out_size bytes of out
 * back through a pipe and leaves by _exit (what it allocated is not the
 * parent's, nor what it measured of its own memory); CHECK-fails unless
 * it exited 0 (no signal, no abort) having sent them all. */
void test_in_child(void (*fn)(void *ctx, void *out), void *ctx, void *out, size_t out_size);

/* n bytes that vary with seed (malloc'd, with one byte to spare). */
unsigned char *test_pattern(size_t n, unsigned int seed);

/* Milliseconds on a monotonic clock. */
double test_now_ms(void);
void test_sleep_ms(unsigned int ms);

/* What a store's log callback was told: how many messages, and the last.
 * Pass test_log_capture as the callback and the struct as its context. */
typedef struct log_capture {
    pthread_mutex_t lock;
    int count;
    char last[1024];
} log_capture;
#define LOG_CAPTURE_INIT {PTHREAD_MUTEX_INITIALIZER, 0, ""}
void test_log_capture(void *ctx, int level, const char *message);
/* CHECK that exactly count messages came, the last mentioning fragment. */
void test_expect_logged(log_capture *c, int count, const char *fragment);

/* The store's counters (CHECKs that they can be read). */
progcache_redis_counters test_redis_counters(const progcache_store *s);

#endif

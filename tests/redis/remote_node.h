/* What the tests of the remote tier in a fleet share: a "node" (a cache
 * directory of its own with the remote tier below it), a kernel to compile
 * with NVRTC (no GPU needed: PROGCACHE_PROGRAM_NO_LOAD), a log that keeps
 * what the library told it, and the statistics of a node. */
#ifndef PROGCACHE_TEST_REMOTE_NODE_H
#define PROGCACHE_TEST_REMOTE_NODE_H

#include <pthread.h>

#include "progcache/cuda.h"
#include "progcache/remote.h"
#include "progcache/stats.h"

/* Every line the library logged, with its level ("W ", "I ", "D " in
 * front), one per line. Thread-safe. */
typedef struct test_log {
    pthread_mutex_t lock;
    char *text;
    size_t len;
} test_log;

void test_log_init(test_log *log);
void test_log_free(test_log *log);
/* The callback: pass the test_log as ctx. */
void test_log_fn(void *ctx, int level, const char *message);
/* Lines at level (PROGCACHE_LOG_*) containing text. */
int test_log_count(test_log *log, int level, const char *text);
/* Print it all to stderr (for a failing test). */
void test_log_dump(test_log *log);

/* Open <scratch>/<name> with ro as its remote tier (NULL: none) and log
 * (NULL: none) as the cache's callback. */
progcache *test_node_open(const char *scratch, const char *name,
                          const progcache_redis_options *ro, test_log *log);

/* A program compiling `extern "C" __global__ void <name>(...)` for sm_90,
 * no load. */
typedef struct test_kernel {
    char source[256];
    const char *options[1];
    progcache_program program;
} test_kernel;
void test_kernel_init(test_kernel *k, const char *name);
/* Its key. */
void test_kernel_key(unsigned char key[PROGCACHE_KEY_SIZE], const test_kernel *k);
/* Its artifact compiled without a cache: what every node must end with. */
void test_kernel_reference(progcache_buf *out, const test_kernel *k);

/* The node's statistics. */
progcache_stats test_node_stats(progcache *cache);

#endif

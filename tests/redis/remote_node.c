#include "remote_node.h"

#include <stdio.h>
#include <string.h>

#include "check.h"

void test_log_init(test_log *log)
{
    memset(log, 0, sizeof *log);
    pthread_mutex_init(&log->lock, NULL);
}

void test_log_free(test_log *log)
{
    pthread_mutex_destroy(&log->lock);
    free(log->text);
}

void test_log_fn(void *ctx, int level, const char *message)
{
    test_log *log = ctx;
    const char *tag = level >= PROGCACHE_LOG_WARN ? "W " : level >= PROGCACHE_LOG_INFO ? "I " : "D ";
    size_t n = strlen(message);
    pthread_mutex_lock(&log->lock);
    char *grown = realloc(log->text, log->len + n + 4);
    CHECK(grown != NULL);
    log->text = grown;
    memcpy(log->text + log->len, tag, 2);
    memcpy(log->text + log->len + 2, message, n);
    log->len += n + 2;
    log->text[log->len++] = '\n';
    log->text[log->len] = '\0';
    pthread_mutex_unlock(&log->lock);
}

int test_log_count(test_log *log, int level, const char *text)
{
    const char *tag = level >= PROGCACHE_LOG_WARN ? "W " : level >= PROGCACHE_LOG_INFO ? "I " : "D ";
    int n = 0;
    pthread_mutex_lock(&log->lock);
    for (const char *p = log->text; p && *p;) {
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char line[4096];
        snprintf(line, sizeof line, "%.*s", (int)len, p);
        if (!strncmp(line, tag, 2) && strstr(line + 2, text))
            n++;
        p = end ? end + 1 : p + len;
    }
    pthread_mutex_unlock(&log->lock);
    return n;
}

void test_log_dump(test_log *log)
{
    pthread_mutex_lock(&log->lock);
    fprintf(stderr, "---- log ----\n%s-------------\n", log->text ? log->text : "");
    pthread_mutex_unlock(&log->lock);
}

progcache *test_node_open(const char *scratch, const char *name,
                          const progcache_redis_options *ro, test_log *log)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", scratch, name);
    progcache_options opts = PROGCACHE_OPTIONS_INIT;
    opts.flags = PROGCACHE_FILE_NO_FSYNC | (ro ? 0 : PROGCACHE_NO_REMOTE);
    opts.remote = ro;
    opts.log = log ? test_log_fn : NULL;
    opts.log_ctx = log;
    progcache *c = NULL;
    CHECK_OK(progcache_open(&c, dir, &opts));
    return c;
}

void test_kernel_init(test_kernel *k, const char *name)
{
    memset(k, 0, sizeof *k);
    snprintf(k->source, sizeof k->source,
             "extern \"C\" __global__ void %s(float *a) { a[threadIdx.x] *= 2.0f; }\n", name);
    k->options[0] = "-arch=sm_90";
    progcache_program_init(&k->program);
    k->program.nvrtc.source = k->source;
    k->program.nvrtc.options = k->options;
    k->program.nvrtc.num_options = 1;
    k->program.flags = PROGCACHE_PROGRAM_NO_LOAD;
}

void test_kernel_key(unsigned char key[PROGCACHE_KEY_SIZE], const test_kernel *k)
{
    CHECK_OK(progcache_key_nvrtc(key, &k->program.nvrtc));
}

void test_kernel_reference(progcache_buf *out, const test_kernel *k)
{
    CHECK_OK(progcache_nvrtc_compile(out, NULL, NULL, &k->program.nvrtc));
}

progcache_stats test_node_stats(progcache *cache)
{
    progcache_stats st = PROGCACHE_STATS_INIT;
    CHECK_OK(progcache_stats_get(&st, cache));
    return st;
}

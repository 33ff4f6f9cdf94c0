/* The background put queue (src/store/redis/put_queue.c): order, flush, drain on
 * free, the byte bound, a push that does not wait for a blocked writer,
 * and refusal in a fork() child. */
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "store/redis/put_queue.h"

typedef struct recorder {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int gate_open; /* the writer blocks until this is 1 */
    int in_write;  /* the writer is blocked at the gate */
    int written;
    char log[4096];
} recorder;

static void record(void *ctx, const void *key, size_t key_len, const void *data, size_t size)
{
    recorder *r = ctx;
    pthread_mutex_lock(&r->lock);
    r->in_write = 1;
    pthread_cond_broadcast(&r->cond);
    while (!r->gate_open)
        pthread_cond_wait(&r->cond, &r->lock);
    r->in_write = 0;
    size_t n = strlen(r->log);
    snprintf(r->log + n, sizeof r->log - n, "%.*s=%.*s;", (int)key_len, (const char *)key,
             (int)size, (const char *)data);
    r->written++;
    pthread_mutex_unlock(&r->lock);
}

static void set_gate(recorder *r, int open)
{
    pthread_mutex_lock(&r->lock);
    r->gate_open = open;
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->lock);
}

static void wait_in_write(recorder *r)
{
    pthread_mutex_lock(&r->lock);
    while (!r->in_write)
        pthread_cond_wait(&r->cond, &r->lock);
    pthread_mutex_unlock(&r->lock);
}

static void init(recorder *r)
{
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->cond, NULL);
}

static void test_order_and_flush(void)
{
    recorder r;
    init(&r);
    r.gate_open = 1;
    progcache__put_queue *q;
    CHECK_OK(progcache__put_queue_new(&q, record, &r, 1 << 20));
    progcache__put_queue_flush(q); /* nothing queued, no thread: returns */
    CHECK_OK(progcache__put_queue_push(q, "a", 1, "1", 1));
    CHECK_OK(progcache__put_queue_push(q, "b", 1, "22", 2));
    CHECK_OK(progcache__put_queue_push(q, "c", 1, "", 0));
    progcache__put_queue_flush(q);
    CHECK(r.written == 3);
    CHECK(strcmp(r.log, "a=1;b=22;c=;") == 0);
    progcache__put_queue_free(q);
    progcache__put_queue_free(NULL);
}

/* A push returns while the writer is stuck; the bound refuses what does
 * not fit; free writes everything that was queued. */
static void test_bound_and_drain(void)
{
    recorder r;
    init(&r);
    progcache__put_queue *q;
    CHECK_OK(progcache__put_queue_new(&q, record, &r, 10));
    CHECK_OK(progcache__put_queue_push(q, "k1", 2, "abcd", 4)); /* 6 bytes */
    wait_in_write(&r); /* the writer holds k1 and waits at the gate */
    CHECK_OK(progcache__put_queue_push(q, "k2", 2, "ab", 2)); /* 10 bytes in all */
    CHECK_RC(PROGCACHE_ENOMEM, progcache__put_queue_push(q, "k3", 2, "", 0));
    CHECK(strstr(progcache_error_last(), "full") != NULL);
    CHECK(r.written == 0);
    set_gate(&r, 1);
    progcache__put_queue_free(q); /* drains */
    CHECK(r.written == 2);
    CHECK(strcmp(r.log, "k1=abcd;k2=ab;") == 0);
}

static void test_fork_child(void)
{
    recorder r;
    init(&r);
    r.gate_open = 1;
    progcache__put_queue *q;
    CHECK_OK(progcache__put_queue_new(&q, record, &r, 1 << 20));
    CHECK_OK(progcache__put_queue_push(q, "p", 1, "x", 1));
    progcache__put_queue_flush(q);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        /* The writer thread is the parent's: the child must write itself. */
        int rc = progcache__put_queue_push(q, "c", 1, "y", 1);
        progcache__put_queue_flush(q); /* must not hang */
        progcache__put_queue_free(q);  /* must not hang either */
        _exit(rc == PROGCACHE_EREMOTE ? 0 : 1);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    progcache__put_queue_free(q);
    CHECK(r.written == 1);
}

int main(void)
{
    test_order_and_flush();
    test_bound_and_drain();
    test_fork_child();
    printf("test_put_queue: ok\n");
    return 0;
}

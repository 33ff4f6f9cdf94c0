/* The background put queue (src/remote/put_queue.c): order, flush,
 * drain on free, the byte bound (records count), a push that does not wait
 * for a blocked writer, kind and records carried with the value, and
 * refusal in a fork() child. */
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "remote/put_queue.h"

typedef struct recorder {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int gate_open; /* the writer blocks until this is 1 */
    int in_write;  /* the writer is blocked at the gate */
    int written;
    char log[4096];
} recorder;

static void record(void *ctx, const progcache__put_item *item)
{
    recorder *r = ctx;
    pthread_mutex_lock(&r->lock);
    r->in_write = 1;
    pthread_cond_broadcast(&r->cond);
    while (!r->gate_open)
        pthread_cond_wait(&r->cond, &r->lock);
    r->in_write = 0;
    size_t n = strlen(r->log);
    snprintf(r->log + n, sizeof r->log - n, "%.*s=%.*s", (int)item->key_len,
             (const char *)item->key, (int)item->size, (const char *)item->data);
    n = strlen(r->log);
    if (item->kind || item->records_len)
        snprintf(r->log + n, sizeof r->log - n, "(%d,%.*s)", (int)item->kind,
                 (int)item->records_len, (const char *)item->records);
    n = strlen(r->log);
    snprintf(r->log + n, sizeof r->log - n, ";");
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

/* Push key=data (strings), no kind or records. */
static int push(progcache__put_queue *q, const char *key, const char *data)
{
    progcache__put_item item = {key, strlen(key), data, strlen(data), PROGCACHE_KIND_UNKNOWN,
                                NULL, 0};
    return progcache__put_queue_push(q, &item);
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
    CHECK_OK(push(q, "a", "1"));
    CHECK_OK(push(q, "b", "22"));
    CHECK_OK(push(q, "c", ""));
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
    CHECK_OK(push(q, "k1", "abcd")); /* 6 bytes */
    wait_in_write(&r); /* the writer holds k1 and waits at the gate */
    CHECK_OK(push(q, "k2", "ab")); /* 10 bytes in all */
    CHECK_RC(PROGCACHE_ENOMEM, push(q, "k3", ""));
    CHECK(strstr(progcache_error_last(), "full") != NULL);
    CHECK(r.written == 0);
    set_gate(&r, 1);
    progcache__put_queue_free(q); /* drains */
    CHECK(r.written == 2);
    CHECK(strcmp(r.log, "k1=abcd;k2=ab;") == 0);
}

/* Kind and records travel with the value (copied: the caller's buffers
 * may change at once), and count against the bound. */
static void test_meta(void)
{
    recorder r;
    init(&r);
    progcache__put_queue *q;
    CHECK_OK(progcache__put_queue_new(&q, record, &r, 12));
    char records[] = "REC";
    progcache__put_item item = {"k", 1, "data", 4, PROGCACHE_KIND_PTX, records, 3};
    CHECK_OK(progcache__put_queue_push(q, &item)); /* 8 bytes */
    memcpy(records, "xxx", 3);
    wait_in_write(&r);
    item.records_len = 4; /* 1 + 4 + 4 = 9: past the bound of 12 with 8 in */
    item.records = "abcd";
    CHECK_RC(PROGCACHE_ENOMEM, progcache__put_queue_push(q, &item));
    set_gate(&r, 1);
    progcache__put_queue_flush(q);
    CHECK(r.written == 1);
    CHECK(strcmp(r.log, "k=data(2,REC);") == 0);
    CHECK_OK(progcache__put_queue_push(q, &item)); /* fits once the first is written */
    progcache__put_queue_free(q);
    CHECK(strcmp(r.log, "k=data(2,REC);k=data(2,abcd);") == 0);
}

static void test_fork_child(void)
{
    recorder r;
    init(&r);
    r.gate_open = 1;
    progcache__put_queue *q;
    CHECK_OK(progcache__put_queue_new(&q, record, &r, 1 << 20));
    CHECK_OK(push(q, "p", "x"));
    progcache__put_queue_flush(q);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        /* The writer thread is the parent's: the child must write itself. */
        int rc = push(q, "c", "y");
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
    test_meta();
    test_fork_child();
    printf("test_put_queue: ok\n");
    return 0;
}

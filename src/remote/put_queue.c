/* A bounded FIFO of puts and the one thread that writes them (put_queue.h).
 *
 * One mutex guards the list and the counters; the thread takes a job out
 * under it and writes without it, so pushes never wait for the store.
 * flush() waits on a sequence number rather than on "queue empty", so a
 * flush is not starved by other threads that keep pushing. */
#include "remote/put_queue.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "error.h"

typedef struct job {
    struct job *next;
    progcache__put_item item; /* pointing into bytes */
    unsigned char bytes[];    /* key, records, then data */
} job;

struct progcache__put_queue {
    pthread_mutex_t lock;
    pthread_cond_t work; /* a job was queued, or stop was set */
    pthread_cond_t done_cond; /* a job was written */
    job *head, *tail;
    uint64_t bytes; /* key, records and data bytes queued or being written */
    uint64_t max_bytes;
    uint64_t pushed, written; /* sequence numbers for flush */
    int started, stop;
    pthread_t thread;
    pid_t pid; /* the process whose thread this is */
    progcache__put_fn write;
    void *ctx;
};

int progcache__put_queue_new(progcache__put_queue **out, progcache__put_fn write, void *ctx,
                             uint64_t max_bytes)
{
    *out = NULL;
    progcache__put_queue *q = progcache__calloc(1, sizeof *q);
    if (!q)
        return progcache__error(PROGCACHE_ENOMEM, "out of memory creating a put queue");
    if (pthread_mutex_init(&q->lock, NULL) != 0) {
        progcache__free(q);
        return progcache__error(PROGCACHE_ENOMEM, "could not create a mutex for a put queue");
    }
    if (pthread_cond_init(&q->work, NULL) != 0) {
        pthread_mutex_destroy(&q->lock);
        progcache__free(q);
        return progcache__error(PROGCACHE_ENOMEM, "could not create a put queue");
    }
    if (pthread_cond_init(&q->done_cond, NULL) != 0) {
        pthread_cond_destroy(&q->work);
        pthread_mutex_destroy(&q->lock);
        progcache__free(q);
        return progcache__error(PROGCACHE_ENOMEM, "could not create a put queue");
    }
    q->max_bytes = max_bytes;
    q->write = write;
    q->ctx = ctx;
    q->pid = getpid();
    *out = q;
    return PROGCACHE_OK;
}

static void *run(void *arg)
{
    progcache__put_queue *q = arg;
    pthread_mutex_lock(&q->lock);
    for (;;) {
        while (!q->head && !q->stop)
            pthread_cond_wait(&q->work, &q->lock);
        job *j = q->head;
        if (!j)
            break; /* stopping, and everything is written */
        q->head = j->next;
        if (!q->head)
            q->tail = NULL;
        pthread_mutex_unlock(&q->lock);
        q->write(q->ctx, &j->item);
        pthread_mutex_lock(&q->lock);
        q->bytes -= j->item.key_len + j->item.records_len + j->item.size;
        q->written++;
        pthread_cond_broadcast(&q->done_cond);
        progcache__free(j);
    }
    pthread_mutex_unlock(&q->lock);
    return NULL;
}

/* Start the thread with every signal blocked: a library thread must not
 * take the application's process-directed signals. Called with the lock. */
static int start(progcache__put_queue *q)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int err = pthread_create(&q->thread, NULL, run, q);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err)
        return progcache__error_errno(PROGCACHE_EREMOTE, err,
                                      "could not start the background put thread");
    q->started = 1;
    return PROGCACHE_OK;
}

int progcache__put_queue_push(progcache__put_queue *q, const progcache__put_item *item)
{
    size_t key_len = item->key_len, records_len = item->records_len, size = item->size;
    if (getpid() != q->pid)
        return progcache__error(PROGCACHE_EREMOTE,
                                "the put queue belongs to the parent process (the store was "
                                "carried across fork()); writing in the caller's thread");
    if (key_len > SIZE_MAX / 4 || records_len > SIZE_MAX / 4 ||
        size > SIZE_MAX - sizeof(job) - key_len - records_len)
        return progcache__error(PROGCACHE_ENOMEM, "a value of %zu bytes is too large to queue",
                                size);
    uint64_t need = (uint64_t)key_len + records_len + size;
    job *j = NULL;
    int rc = PROGCACHE_OK;

    pthread_mutex_lock(&q->lock);
    if (need > q->max_bytes - (q->bytes < q->max_bytes ? q->bytes : q->max_bytes)) {
        rc = progcache__error(PROGCACHE_ENOMEM,
                              "the put queue is full (%llu bytes waiting, cap %llu): dropped a "
                              "value of %zu bytes",
                              (unsigned long long)q->bytes, (unsigned long long)q->max_bytes,
                              size);
        goto done;
    }
    if (!q->started && (rc = start(q)))
        goto done;
    /* Allocated under the lock only so a full queue costs no allocation;
     * the copy is what keeps the caller's buffer free the moment we return. */
    j = progcache__malloc(sizeof *j + key_len + records_len + size);
    if (!j) {
        rc = progcache__error(PROGCACHE_ENOMEM, "out of memory queueing a value of %zu bytes",
                              size);
        goto done;
    }
    j->next = NULL;
    j->item = *item;
    j->item.key = j->bytes;
    j->item.records = j->bytes + key_len;
    j->item.data = j->bytes + key_len + records_len;
    memcpy(j->bytes, item->key, key_len);
    if (records_len)
        memcpy(j->bytes + key_len, item->records, records_len);
    if (size)
        memcpy(j->bytes + key_len + records_len, item->data, size);
    if (q->tail)
        q->tail->next = j;
    else
        q->head = j;
    q->tail = j;
    q->bytes += need;
    q->pushed++;
    pthread_cond_signal(&q->work);

done:
    pthread_mutex_unlock(&q->lock);
    return rc;
}

void progcache__put_queue_flush(progcache__put_queue *q)
{
    if (!q || getpid() != q->pid)
        return;
    pthread_mutex_lock(&q->lock);
    uint64_t target = q->pushed;
    while (q->started && q->written < target)
        pthread_cond_wait(&q->done_cond, &q->lock);
    pthread_mutex_unlock(&q->lock);
}

static void free_jobs(job *j)
{
    while (j) {
        job *next = j->next;
        progcache__free(j);
        j = next;
    }
}

void progcache__put_queue_free(progcache__put_queue *q)
{
    if (!q)
        return;
    if (getpid() != q->pid) {
        /* A fork() child: the thread does not exist here, and what the
         * parent queued is the parent's to write. The lock and conditions
         * are left alone: the parent's thread was waiting on one when the
         * process forked, and destroying a condition with a waiter that
         * will never wake blocks for ever. */
        free_jobs(q->head);
        progcache__free(q);
        return;
    }
    pthread_mutex_lock(&q->lock);
    q->stop = 1;
    pthread_cond_signal(&q->work);
    pthread_mutex_unlock(&q->lock);
    if (q->started)
        pthread_join(q->thread, NULL);
    free_jobs(q->head);
    pthread_cond_destroy(&q->done_cond);
    pthread_cond_destroy(&q->work);
    pthread_mutex_destroy(&q->lock);
    progcache__free(q);
}

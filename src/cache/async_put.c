/* Puts that finish in the background (PROGCACHE_PROGRAM_ASYNC_STORE).
 *
 * A miss needs the artifact now; the put (temp file, fsync, rename, fsync:
 * about a millisecond, more on a busy disk) can finish later. A cache handle
 * that ever queues a put gets one worker thread and a FIFO of jobs; each
 * job owns a copy of the bytes (the caller may reuse its buffer at once) and
 * the key's single-flight lock, if the caller held one. progcache_close()
 * drains the queue and joins the thread before it releases the tiers.
 * One mutex guards the queue; it is never held during a put. */
#include "cache/async_put.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "cache/cache_handle.h"
#include "cache/cache_stats.h"
#include "error.h"
#include "sha256.h"

struct job {
    struct job *next;
    progcache__flight flight;
    unsigned char *key;
    size_t key_len;
    unsigned char *data;
    size_t size;
    progcache_entry_meta meta; /* kind and a copy of the records */
    progcache_log_fn log;
    void *log_ctx;
};

struct progcache__async {
    pthread_t thread;
    int started;
    struct job *head, *tail;
    int busy; /* a put is running outside the lock */
    int stop; /* progcache_close is waiting: drain, then exit */
    pthread_cond_t wake; /* a job was queued, or stop was set */
    pthread_cond_t idle; /* the queue ran empty */
    int error;           /* first failure since the last flush */
    char *message;       /* its message, whole (NULL: no memory for it) */
};

static void report(progcache *cache, const struct job *job, int rc)
{
    char hex[65];
    progcache__hex(hex, job->key, job->key_len < 32 ? job->key_len : 32);
    struct progcache__async *a = cache->async;
    const char *why = progcache_error_last();
    size_t size = strlen(why) + 64;
    char *message = progcache__malloc(size);
    if (message)
        snprintf(message, size, "background store of key %.16s... failed: %s", hex, why);
    progcache__log(job->log, job->log_ctx, PROGCACHE_LOG_WARN,
                   "background store of key %.16s... failed: %s", hex, why);
    pthread_mutex_lock(&cache->async_lock);
    if (!a->error) {
        a->error = rc;
        a->message = message;
        message = NULL;
    }
    pthread_mutex_unlock(&cache->async_lock);
    progcache__free(message);
}

static void *worker_main(void *arg)
{
    progcache *cache = arg;
    struct progcache__async *a = cache->async;
    pthread_mutex_lock(&cache->async_lock);
    for (;;) {
        while (!a->head && !a->stop)
            pthread_cond_wait(&a->wake, &cache->async_lock);
        struct job *job = a->head;
        if (!job)
            break; /* stop, and nothing left to store */
        a->head = job->next;
        if (!a->head)
            a->tail = NULL;
        a->busy = 1;
        pthread_mutex_unlock(&cache->async_lock);

        int rc = progcache__cache_put_meta(cache, job->key, job->key_len, job->data, job->size,
                                           &job->meta);
        progcache__flight_end(&job->flight); /* waiters may look now */
        if (rc)
            report(cache, job, rc);
        progcache_entry_meta_release(&job->meta);
        progcache__free(job);

        pthread_mutex_lock(&cache->async_lock);
        a->busy = 0;
        if (!a->head)
            pthread_cond_broadcast(&a->idle);
    }
    pthread_mutex_unlock(&cache->async_lock);
    return NULL;
}

/* Start the worker; called with async_lock held. */
static int start_worker(progcache *cache)
{
    struct progcache__async *a = progcache__calloc(1, sizeof *a);
    if (!a)
        return progcache__error(PROGCACHE_ENOMEM, "out of memory for the background store");
    pthread_cond_init(&a->wake, NULL);
    pthread_cond_init(&a->idle, NULL);
    cache->async = a;
    int err = pthread_create(&a->thread, NULL, worker_main, cache);
    if (err) {
        cache->async = NULL;
        pthread_cond_destroy(&a->wake);
        pthread_cond_destroy(&a->idle);
        progcache__free(a);
        return progcache__error_errno(progcache__code_from_errno(err), err,
                                      "could not start the background store thread");
    }
    a->started = 1;
    return PROGCACHE_OK;
}

int progcache__cache_put_async(progcache *cache, const void *key, size_t key_len,
                               const void *data, size_t size, const progcache_entry_meta *meta,
                               progcache__flight *flight, progcache_log_fn log, void *log_ctx)
{
    if (!cache || !key || !key_len || (!data && size))
        return progcache__error(PROGCACHE_EINVAL, "progcache__cache_put_async: bad argument");
    /* One allocation: the job, then the key, then the bytes. */
    if (size > (size_t)-1 - sizeof(struct job) - key_len)
        return progcache__error(PROGCACHE_ENOMEM, "artifact of %zu bytes is too large", size);
    struct job *job = progcache__malloc(sizeof *job + key_len + size);
    if (!job)
        return progcache__error(PROGCACHE_ENOMEM,
                                "out of memory copying a %zu-byte artifact for the background "
                                "store",
                                size);
    job->next = NULL;
    job->flight = (progcache__flight)PROGCACHE__FLIGHT_INIT;
    job->key = (unsigned char *)(job + 1);
    job->key_len = key_len;
    job->data = job->key + key_len;
    job->size = size;
    job->log = log;
    job->log_ctx = log_ctx;
    memcpy(job->key, key, key_len);
    if (size)
        memcpy(job->data, data, size);
    job->meta = (progcache_entry_meta)PROGCACHE_ENTRY_META_INIT;
    if (meta) {
        job->meta.kind = meta->kind;
        if (meta->records.size &&
            progcache_buf_set(&job->meta.records, meta->records.data, meta->records.size)) {
            progcache__free(job);
            return progcache__error(PROGCACHE_ENOMEM, "out of memory copying the records of an "
                                                      "artifact for the background store");
        }
    }

    pthread_mutex_lock(&cache->async_lock);
    int rc = cache->async ? PROGCACHE_OK : start_worker(cache);
    if (!rc) {
        struct progcache__async *a = cache->async;
        if (flight) {
            job->flight = *flight;
            *flight = (progcache__flight)PROGCACHE__FLIGHT_INIT;
        }
        if (a->tail)
            a->tail->next = job;
        else
            a->head = job;
        a->tail = job;
        pthread_cond_signal(&a->wake);
    }
    pthread_mutex_unlock(&cache->async_lock);
    if (rc) {
        progcache_entry_meta_release(&job->meta);
        progcache__free(job);
    }
    return rc;
}

int progcache_flush(progcache *cache)
{
    if (!cache)
        return PROGCACHE_OK;
    char *message = NULL;
    int rc = PROGCACHE_OK;
    pthread_mutex_lock(&cache->async_lock);
    struct progcache__async *a = cache->async;
    if (a) {
        while (a->head || a->busy)
            pthread_cond_wait(&a->idle, &cache->async_lock);
        rc = a->error;
        message = a->message;
        a->error = 0;
        a->message = NULL;
    }
    pthread_mutex_unlock(&cache->async_lock);
    /* Then the tiers' own queues (the remote tier writes in the
     * background): after a flush, other nodes can read what was put. Their
     * failures are the tiers' to tell and count; they fail no call. */
    progcache__error_saved saved;
    progcache__error_save(&saved);
    for (size_t i = 0; i < cache->num_tiers; i++)
        (void)progcache_store_flush(cache->tiers[i]);
    progcache__error_restore(&saved);
    if (rc)
        progcache__error(rc, "%s",
                         message ? message
                                 : "a background store failed (no memory was left for its "
                                   "message)");
    progcache__free(message);
    return rc;
}

void progcache__cache_async_close(progcache *cache)
{
    pthread_mutex_lock(&cache->async_lock);
    struct progcache__async *a = cache->async;
    if (a) {
        a->stop = 1;
        pthread_cond_signal(&a->wake);
    }
    pthread_mutex_unlock(&cache->async_lock);
    if (!a)
        return;
    /* The worker drains its queue before it sees stop. */
    pthread_join(a->thread, NULL);
    pthread_cond_destroy(&a->wake);
    pthread_cond_destroy(&a->idle);
    progcache__free(a->message);
    progcache__free(a);
    cache->async = NULL;
}

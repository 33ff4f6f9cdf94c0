/* One HTTP request of the HTTP/S3 tier through libcurl (http_store.h):
 * bounded, within one deadline, without a signal.
 *
 * - Bound: CURLOPT_MAXFILESIZE_LARGE refuses a Content-Length over it
 *   before any body arrives, and the write callback stops at it whatever
 *   the header said (a server may send no length, or lie).
 * - Deadline: CURLOPT_TIMEOUT_MS covers the whole operation, name
 *   resolution (the threaded resolver: no alarm) and connecting included:
 *   the tier's timeout plus the bytes sent and the bound at min_rate. The
 *   progress callback holds a tighter one: the timeout plus the bytes
 *   moved so far at min_rate, so a server that drips is stopped within
 *   the timeout of its last fair share, not after the bound's allowance.
 * - Signals: CURLOPT_NOSIGNAL, and SIGPIPE blocked on this thread during
 *   the transfer (a TLS write to a closed socket raises it), any one
 *   raised then consumed before it is unblocked.
 * - Redirects are not followed: an object store that redirects is
 *   misconfigured, and following would send credentials elsewhere.
 * Handles are pooled (their connections and TLS sessions with them). */
#include "store/http/http_store.h"

#include <curl/curl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "clock.h"
#include "error.h"
#include "sha256.h"

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc = CURLE_OK;

static void global_init(void) { global_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

typedef struct xfer {
    progcache_buf *out;
    uint64_t bound;
    int over;            /* the body passed the bound */
    uint64_t start_ms;
    unsigned int timeout_ms;
    uint64_t min_rate;
    int late;            /* stopped by the progress deadline */
    const unsigned char *body;
    size_t body_len, sent;
} xfer;

static size_t on_data(char *data, size_t size, size_t n, void *ctx)
{
    xfer *x = ctx;
    size_t len = size * n;
    if ((uint64_t)x->out->size + len > x->bound) {
        x->over = 1;
        return 0; /* CURLE_WRITE_ERROR */
    }
    if (progcache__buf_reserve(x->out, x->out->size + len))
        return 0; /* out of memory: CURLE_WRITE_ERROR, said as a lost reply */
    memcpy(x->out->data + x->out->size, data, len);
    progcache__buf_set_size(x->out, x->out->size + len);
    return len;
}

/* Error replies are bounded too: S3's XML error is a few hundred bytes. */
#define ERROR_BODY_MAX 4096

static int on_progress(void *ctx, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    xfer *x = ctx;
    uint64_t moved = (uint64_t)(dlnow > 0 ? dlnow : 0) + (uint64_t)(ulnow > 0 ? ulnow : 0);
    uint64_t allowed = x->timeout_ms + moved * 1000 / x->min_rate;
    if ((uint64_t)progcache__clock_ms() - x->start_ms > allowed) {
        x->late = 1;
        return 1; /* CURLE_ABORTED_BY_CALLBACK */
    }
    return 0;
}

static CURL *handle_take(progcache__http_store *s)
{
    CURL *h = NULL;
    /* A fork() child shares the pooled connections' sockets (and TLS
     * state) with its parent: it never touches them, and makes its own. */
    int own = getpid() == s->pid;
    pthread_mutex_lock(&s->pool_lock);
    if (own && s->pool_n > 0)
        h = s->pool[--s->pool_n];
    pthread_mutex_unlock(&s->pool_lock);
    if (h)
        curl_easy_reset(h); /* options go; connections and sessions stay */
    else if (pthread_once(&global_once, global_init) == 0 && global_rc == CURLE_OK)
        h = curl_easy_init();
    return h;
}

static void handle_give(progcache__http_store *s, CURL *h, int keep)
{
    pthread_mutex_lock(&s->pool_lock);
    if (keep && getpid() == s->pid && s->pool_n < PROGCACHE__HTTP_POOL) {
        s->pool[s->pool_n++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&s->pool_lock);
    if (h)
        curl_easy_cleanup(h);
}

static void fail(progcache__http_failure *f, progcache__remote_cause cause, int timeout,
                 const char *fmt, ...) PROGCACHE_PRINTF(4, 5);
static void fail(progcache__http_failure *f, progcache__remote_cause cause, int timeout,
                 const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->what, sizeof f->what, fmt, ap);
    va_end(ap);
    f->cause = cause;
    f->timeout = timeout;
    f->reached = 0;
}

/* curl_easy_perform with SIGPIPE held off this thread (see the top). */
static CURLcode perform(CURL *h)
{
    sigset_t pipe_set, old, pending;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    sigpending(&pending);
    int was_pending = sigismember(&pending, SIGPIPE);
    CURLcode rc = curl_easy_perform(h);
    if (!was_pending && !sigismember(&old, SIGPIPE)) {
        struct timespec zero = {0, 0};
        sigpending(&pending);
        if (sigismember(&pending, SIGPIPE))
            sigtimedwait(&pipe_set, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

long progcache__http_request(progcache__http_store *s, const char *method, const char *url,
                             const void *body, size_t body_len, progcache_buf *out,
                             uint64_t bound, const char *extra, progcache__http_failure *f)
{
    const progcache__http_config *c = &s->cfg;
    char errbuf[CURL_ERROR_SIZE] = "";
    progcache_buf scratch = PROGCACHE_BUF_INIT;
    xfer x = {out, bound, 0, (uint64_t)progcache__clock_ms(), c->timeout_ms, c->min_rate, 0,
              body, body_len, 0};
    if (out)
        out->size = 0;
    else {
        x.out = &scratch; /* an error page, kept for S3's error code */
        x.bound = ERROR_BODY_MAX;
    }
    CURL *h = handle_take(s);
    if (!h) {
        fail(f, PROGCACHE__CAUSE_CONNECT, 0, "libcurl could not start a transfer");
        return 0;
    }
    if (c->ca_file) {
        /* The bytes read and checked at open, never the path again; a
         * libcurl that cannot take them sends nothing (no fallback to the
         * system's CAs: rule 4). */
        struct curl_blob blob = {c->ca.data, c->ca.size, CURL_BLOB_NOCOPY};
        /* The blob replaces the CA file only: libcurl's built-in CA
         * directory (CURLOPT_CAPATH, /etc/ssl/certs on Debian) would still
         * vouch for any public CA's certificate. */
        if (curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &blob) != CURLE_OK ||
            curl_easy_setopt(h, CURLOPT_CAPATH, NULL) != CURLE_OK ||
            curl_easy_setopt(h, CURLOPT_CAINFO, NULL) != CURLE_OK) {
            fail(f, PROGCACHE__CAUSE_AUTH, 0,
                 "TLS: this libcurl cannot take a CA from memory (CURLOPT_CAINFO_BLOB); "
                 "nothing is sent rather than trusting other CAs than %s", c->ca_file);
            handle_give(s, h, 0);
            return 0;
        }
    }
    uint64_t total_ms = c->timeout_ms + ((uint64_t)body_len + bound) * 1000 / c->min_rate;
    struct curl_slist *headers = NULL, *tmp;
    /* An octet stream, not a form. (No "Expect:" line to switch off a
     * 100-continue wait: libcurl sends none for a body given whole, and
     * its SigV4 would sign the empty header it never sends.) */
    headers = curl_slist_append(NULL, "Content-Type: application/octet-stream");
    if (headers && c->token_header && (tmp = curl_slist_append(headers, c->token_header)))
        headers = tmp;
    if (headers && extra && (tmp = curl_slist_append(headers, extra)))
        headers = tmp;
    if (headers && c->sigv4) {
        /* S3 wants the payload's SHA-256 in a header it signs; this
         * libcurl (7.88) does not add it. */
        unsigned char digest[PROGCACHE_SHA256_SIZE];
        char line[40 + 2 * PROGCACHE_SHA256_SIZE] = "x-amz-content-sha256: ";
        if (progcache__sha256_oneshot(digest, body_len ? body : "", body_len) == 0) {
            progcache__hex(line + strlen(line), digest, sizeof digest);
            if ((tmp = curl_slist_append(headers, line)))
                headers = tmp;
        }
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)c->timeout_ms);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(total_ms > 86400000 ? 86400000 : total_ms));
    if (strcmp(method, "HEAD") != 0) /* a HEAD's length is the object's, not a reply's */
        curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)x.bound);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, &x);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);

    if (c->sigv4) {
        curl_easy_setopt(h, CURLOPT_AWS_SIGV4, c->sigv4);
        curl_easy_setopt(h, CURLOPT_USERPWD, c->userpwd);
    } else if (c->bearer) {
        curl_easy_setopt(h, CURLOPT_HTTPAUTH, CURLAUTH_BEARER);
        curl_easy_setopt(h, CURLOPT_XOAUTH2_BEARER, c->bearer);
    } else if (c->userpwd) {
        curl_easy_setopt(h, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
        curl_easy_setopt(h, CURLOPT_USERPWD, c->userpwd);
    }
    if (strcmp(method, "HEAD") == 0) {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else if (strcmp(method, "PUT") == 0) {
        /* The body as post fields under the PUT verb: libcurl then signs
         * its SHA-256 (SigV4) and sends it from our buffer, uncopied. */
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body_len ? body : "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "PUT");
    } else if (strcmp(method, "GET") != 0) {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    }
    CURLcode rc = headers ? perform(h) : CURLE_OUT_OF_MEMORY;
    long status = 0;
    if (rc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    const char *why = errbuf[0] ? errbuf : curl_easy_strerror(rc);
    if (rc == CURLE_OK && status >= 200 && status <= 599) {
        if (status >= 300)
            progcache__http_status_failure(f, method, status, out ? out : &scratch);
    } else if (x.over || rc == CURLE_FILESIZE_EXCEEDED) {
        fail(f, PROGCACHE__CAUSE_BOUND, 0,
             "%s answered more than %llu bytes (the bound: max_artifact_size and the envelope); "
             "stopped",
             method, (unsigned long long)x.bound);
        status = 0;
    } else if (x.late || rc == CURLE_OPERATION_TIMEDOUT) {
        fail(f, PROGCACHE__CAUSE_TIMEOUT, 1,
             "%s ran out of its deadline (timeout_ms %u plus the bytes moved at %llu bytes/s): "
             "%s",
             method, c->timeout_ms, (unsigned long long)c->min_rate,
             x.late ? "the server answered too slowly, or not at all" : why);
        status = 0;
    } else if (rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CACERT_BADFILE ||
               rc == CURLE_SSL_CONNECT_ERROR || rc == CURLE_SSL_CERTPROBLEM) {
        fail(f, PROGCACHE__CAUSE_AUTH, 0, "TLS: %s (the server's certificate is checked against "
             "%s%s)", why, c->ca_file ? "the CA file " : "the system's CAs",
             c->ca_file ? c->ca_file : "");
        status = 0;
    } else if (rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_COULDNT_CONNECT) {
        fail(f, PROGCACHE__CAUSE_CONNECT, 0, "%s", why);
        status = 0;
    } else {
        fail(f, PROGCACHE__CAUSE_LOST, 0, "%s: %s", method, why);
        status = 0;
    }
    curl_slist_free_all(headers);
    progcache_buf_free(&scratch);
    handle_give(s, h, status != 0);
    return status;
}

/* Listing the HTTP/S3 tier (http_store.h): the names and sizes of the
 * objects under the prefix, for foreach, count, total_size and clear.
 *
 * - S3: ListObjectsV2 (GET bucket?list-type=2&prefix=...), page by page
 *   through its continuation token; <Key> and <LastModified> of each
 *   <Contents>.
 * - HTTP: a GET of the prefix itself, answered by nginx's
 *   `autoindex on; autoindex_format json;` (docs/REMOTE.md): an array of
 *   {"name": ..., "type": "file", "mtime": HTTP-date, "size": N}. A server
 *   that lists nothing
 *   there (404) holds nothing progcache can name.
 * Only names of 64 hex digits are entries; anything else under the prefix
 * is not ours and is neither listed nor removed. Every listing reply is
 * bounded (LIST_MAX). A size is the payload's, read from the envelope's
 * header (a ranged GET of its first bytes), or from the whole value with
 * PROGCACHE_ENTRIES_READ. When an object was written (mtime_ns) is the
 * listing's: what `progcache prune --remote --older-than` goes by. */
#include "store/http/http_store.h"

#include <curl/curl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "error.h"
#include "sha256.h"

#define LIST_MAX (UINT64_C(64) << 20)
#define WANTS_BYTES (PROGCACHE_ENTRIES_READ | PROGCACHE_ENTRIES_INSPECT | PROGCACHE_ENTRIES_RECORDS)

typedef progcache__http_store http_store;

typedef struct walk {
    http_store *s;
    unsigned int flags;
    progcache_entry_fn fn;
    void *ctx;
    progcache_buf value;
    progcache_entry_meta meta;
} walk;

static int is_name(const char *p, size_t len)
{
    if (len != 64)
        return 0;
    for (size_t i = 0; i < 64; i++)
        if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
            return 0;
    return 1;
}

static int list_error(http_store *s, const progcache__http_failure *f)
{
    progcache__http_failed(s, f);
    return progcache__error(PROGCACHE_EREMOTE, "listing the remote tier %s: %s", s->cfg.where,
                            f->what);
}

/* Hand one entry to the caller, reading what the flags ask for. */
static int one(walk *w, const char *name, int64_t mtime_ns)
{
    http_store *s = w->s;
    progcache_entry e;
    progcache__http_failure f;
    char why[600] = "";
    memset(&e, 0, sizeof e);
    memcpy(e.name, name, 64);
    e.mtime_ns = mtime_ns;
    size_t bl = strlen(s->cfg.base);
    char *url = progcache__malloc(bl + 65);
    if (!url)
        return progcache__error(PROGCACHE_ENOMEM, "listing the remote tier: out of memory");
    memcpy(url, s->cfg.base, bl);
    memcpy(url + bl, e.name, 65);
    int want = (w->flags & WANTS_BYTES) != 0;
    uint64_t bound = want ? s->cfg.max_artifact_size + PROGCACHE__ENVELOPE_MAX_HEADER +
                                PROGCACHE_RECORDS_MAX
                          : 4096;
    long status = progcache__http_request(s, "GET", url, NULL, 0, &w->value, bound,
                                          want ? NULL : "Range: bytes=0-23", &f);
    progcache__free(url);
    if (status == 404)
        return 0; /* removed since the listing */
    if (status != 200 && status != 206)
        return list_error(s, &f);
    progcache__envelope env;
    progcache__envelope_id id;
    memset(&id, 0, sizeof id);
    for (int i = 0; i < 32; i++)
        id.hash[i] = (unsigned char)(progcache__hex_digit(name[2 * i]) << 4 |
                                     progcache__hex_digit(name[2 * i + 1]));
    progcache__error_saved saved;
    progcache__error_save(&saved);
    if (!want) {
        uint64_t total = 0, size = 0;
        size_t header_len = 0;
        if (progcache__envelope_length(&total, &size, &header_len, w->value.data,
                                       w->value.size) == PROGCACHE_OK)
            e.size = size;
        else
            snprintf(why, sizeof why, "%s", progcache_error_last());
    } else if (s->hmac) {
        snprintf(why, sizeof why,
                 "not read: a shared secret is configured, and a value's HMAC tag covers its "
                 "cache key, which a listing does not know (get it by its key to check it)");
    } else if (progcache__envelope_open(&env, w->value.data, w->value.size, &id, NULL)) {
        snprintf(why, sizeof why, "%s", progcache_error_last());
    } else {
        e.data = env.payload;
        e.size = env.size;
        if (w->flags & PROGCACHE_ENTRIES_RECORDS) {
            progcache_entry_meta_clear(&w->meta);
            if (progcache_buf_set(&w->meta.records, env.records, env.records_len) == 0) {
                w->meta.kind = env.kind;
                w->meta.seal = env.version >= 2 ? PROGCACHE_SEAL_MATCHED : PROGCACHE_SEAL_NONE;
                e.meta = &w->meta;
            }
        }
    }
    progcache__error_restore(&saved);
    if (why[0])
        e.error = why;
    return w->fn(w->ctx, &e);
}

/* The text between open and close after *p (within end), or NULL. */
static const char *between(const char **p, const char *end, const char *open,
                           const char *close, size_t *len)
{
    size_t ol = strlen(open), cl = strlen(close);
    for (const char *q = *p; q + ol <= end; q++) {
        if (memcmp(q, open, ol) != 0)
            continue;
        const char *v = q + ol;
        for (const char *r = v; r + cl <= end; r++)
            if (memcmp(r, close, cl) == 0) {
                *len = (size_t)(r - v);
                *p = r + cl;
                return v;
            }
        return NULL;
    }
    return NULL;
}

/* S3's <LastModified> (ISO 8601, UTC: 2026-12-05T03:56:36.000Z) in ns
 * since 1970, 0 when it cannot be read. */
static int64_t s3_time(const char *v, size_t len)
{
    char text[64];
    struct tm tm;
    if (len >= sizeof text)
        return 0;
    memcpy(text, v, len);
    text[len] = 0;
    memset(&tm, 0, sizeof tm);
    if (!strptime(text, "%Y-%m-%dT%H:%M:%S", &tm))
        return 0;
    time_t t = timegm(&tm);
    return t > 0 ? (int64_t)t * 1000000000 : 0;
}

/* nginx's "mtime" (an HTTP date: Sat, 05 Dec 2026 03:56:36 GMT), read by
 * libcurl, in ns since 1970; 0 when it cannot be read. */
static int64_t http_time(const char *v, size_t len)
{
    char text[64];
    if (len >= sizeof text)
        return 0;
    memcpy(text, v, len);
    text[len] = 0;
    time_t t = curl_getdate(text, NULL);
    return t > 0 ? (int64_t)t * 1000000000 : 0;
}

/* The value of field (open .. close) within [p, limit), or 0: the time
 * read by parse. */
static int64_t field_time(const char *p, const char *limit, const char *open,
                          const char *close, int64_t (*parse)(const char *, size_t))
{
    size_t len;
    const char *v = limit ? between(&p, limit, open, close, &len) : NULL;
    return v ? parse(v, len) : 0;
}

/* nginx's JSON autoindex of the prefix. */
static int list_http(walk *w)
{
    http_store *s = w->s;
    progcache__http_failure f;
    progcache_buf page = PROGCACHE_BUF_INIT;
    long status = progcache__http_request(s, "GET", s->cfg.base, NULL, 0, &page, LIST_MAX,
                                          "Accept: application/json", &f);
    int rc = 0;
    if (status == 404) {
        rc = 0;
    } else if (status != 200) {
        rc = list_error(s, &f);
    } else {
        const char *p = (const char *)page.data, *end = p + page.size;
        size_t len;
        const char *name;
        while (rc == 0 && (name = between(&p, end, "\"name\":\"", "\"", &len)))
            if (is_name(name, len)) {
                char n[65];
                memcpy(n, name, 64);
                n[64] = 0;
                /* This object's fields end at its closing brace. */
                const char *obj_end = memchr(p, '}', (size_t)(end - p));
                rc = one(w, n, field_time(p, obj_end, "\"mtime\":\"", "\"", http_time));
            }
    }
    progcache_buf_free(&page);
    return rc;
}

/* S3's ListObjectsV2, page by page. */
static int list_s3(walk *w)
{
    http_store *s = w->s;
    progcache__http_failure f;
    progcache_buf page = PROGCACHE_BUF_INIT;
    char *token = NULL;
    int rc = 0;
    CURL *esc = curl_easy_init();
    char *prefix = esc ? curl_easy_escape(esc, s->cfg.prefix, 0) : NULL;
    size_t pl = strlen(s->cfg.prefix);
    if (!prefix)
        rc = progcache__error(PROGCACHE_ENOMEM, "listing the remote tier: out of memory");
    while (rc == 0) {
        char *tok = token ? curl_easy_escape(esc, token, 0) : NULL;
        size_t ul = strlen(s->cfg.root) + strlen(prefix) + (tok ? strlen(tok) : 0) + 80;
        char *url = progcache__malloc(ul);
        if (url)
            snprintf(url, ul, "%s/?list-type=2&prefix=%s%s%s", s->cfg.root, prefix,
                     tok ? "&continuation-token=" : "", tok ? tok : "");
        curl_free(tok);
        long status = url ? progcache__http_request(s, "GET", url, NULL, 0, &page, LIST_MAX,
                                                    NULL, &f)
                          : -1;
        progcache__free(url);
        progcache__free(token);
        token = NULL;
        if (status == -1) {
            rc = progcache__error(PROGCACHE_ENOMEM, "listing the remote tier: out of memory");
            break;
        }
        if (status != 200) {
            rc = list_error(s, &f);
            break;
        }
        const char *p = (const char *)page.data, *end = p + page.size, *v;
        size_t len;
        while (rc == 0 && (v = between(&p, end, "<Key>", "</Key>", &len)))
            if (len == pl + 64 && memcmp(v, s->cfg.prefix, pl) == 0 && is_name(v + pl, 64)) {
                char n[65];
                memcpy(n, v + pl, 64);
                n[64] = 0;
                const char *contents_end = memmem(p, (size_t)(end - p), "</Contents>", 11);
                rc = one(w, n, field_time(p, contents_end, "<LastModified>", "</LastModified>",
                                          s3_time));
            }
        p = (const char *)page.data;
        int more = between(&p, end, "<IsTruncated>true", "</IsTruncated>", &len) != NULL;
        p = (const char *)page.data;
        v = between(&p, end, "<NextContinuationToken>", "</NextContinuationToken>", &len);
        if (rc || !more || !v)
            break;
        if (!(token = progcache__malloc(len + 1)))
            rc = progcache__error(PROGCACHE_ENOMEM, "listing the remote tier: out of memory");
        else {
            memcpy(token, v, len);
            token[len] = 0;
        }
    }
    progcache__free(token);
    curl_free(prefix);
    curl_easy_cleanup(esc);
    progcache_buf_free(&page);
    return rc;
}

int progcache__http_foreach(progcache_store *store, unsigned int flags, progcache_entry_fn fn,
                            void *ctx)
{
    walk w;
    memset(&w, 0, sizeof w);
    w.s = (http_store *)store;
    w.flags = flags;
    w.fn = fn;
    w.ctx = ctx;
    w.meta.version = PROGCACHE_ENTRY_META_VERSION;
    progcache__put_queue_flush(w.s->queue); /* what was put is listed */
    int rc = w.s->cfg.s3 ? list_s3(&w) : list_http(&w);
    progcache_buf_free(&w.value);
    progcache_buf_free(&w.meta.records);
    return rc;
}

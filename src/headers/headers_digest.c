/* The headers digest: cuda.core's extra_digest for a program that has
 * headers, in memory or on disk (docs/KEY.md, "The headers digest"). One
 * recipe for both, framed like the key, so that a Python program passing
 * the same headers to cuda.core can compute the same digest and share the
 * entry:
 *
 *     headers        "1"                  (the recipe's version)
 *     memory_count   N                    (decimal)
 *     per header in memory, sorted by name (bytewise):
 *       memory_name  the name
 *       memory_bytes its content
 *     file_count     M                    (decimal)
 *     per header file, in the order found:
 *       file_path    the path as NVRTC opens it
 *       file_sha256  SHA-256 of its bytes (32 bytes)
 *     toolkit        the toolkit identity (32 bytes), or empty
 *     extra_digest   the caller's digest, only when given
 *
 * Headers in memory are sorted because NVRTC refuses two of one name, so
 * their order cannot change the program. */
#include "headers/headers_digest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "error.h"
#include "key/frame.h"
#include "headers/include_scan.h"
#include "key/key_options.h"
#include "sha256.h"

static size_t content_len(const progcache_header *h)
{
    return h->length ? h->length : strlen(h->content);
}

static int by_name(const void *a, const void *b)
{
    /* strcmp orders as unsigned bytes, a prefix first: Python's sorted()
     * over the UTF-8 names. */
    return strcmp((*(const progcache_header *const *)a)->name,
                  (*(const progcache_header *const *)b)->name);
}

static int hash_recipe(progcache__sha256 *h, const progcache_key_nvrtc_options *o,
                       const progcache__header_file *files, size_t num_files,
                       const unsigned char *toolkit_id)
{
    size_t n = o->num_headers;
    const progcache_header **sorted = NULL;
    int rc = progcache__frame_str(h, "headers", "1");
    if (!rc)
        rc = progcache__frame_count(h, "memory_count", n);
    if (!rc && n) {
        if (!(sorted = progcache__calloc(n, sizeof *sorted)))
            return progcache__error(PROGCACHE_ENOMEM, "out of memory sorting %zu headers", n);
        for (size_t i = 0; i < n; i++)
            sorted[i] = &o->headers[i];
        qsort(sorted, n, sizeof *sorted, by_name);
    }
    for (size_t i = 0; !rc && i < n; i++) {
        rc = progcache__frame_str(h, "memory_name", sorted[i]->name);
        if (!rc)
            rc = progcache__frame(h, "memory_bytes", sorted[i]->content, content_len(sorted[i]));
    }
    progcache__free(sorted);
    if (!rc)
        rc = progcache__frame_count(h, "file_count", num_files);
    for (size_t i = 0; !rc && i < num_files; i++) {
        rc = progcache__frame_str(h, "file_path", files[i].path);
        if (!rc)
            rc = progcache__frame(h, "file_sha256", files[i].sha256, sizeof files[i].sha256);
    }
    if (!rc)
        rc = progcache__frame(h, "toolkit", toolkit_id, toolkit_id ? 32 : 0);
    if (!rc && o->extra_digest)
        rc = progcache__frame(h, "extra_digest", o->extra_digest, o->extra_digest_len);
    return rc;
}

int progcache__headers_digest(unsigned char out[32], const progcache_key_nvrtc_options *o,
                              const progcache__header_file *files, size_t num_files,
                              const unsigned char *toolkit_id)
{
    progcache__sha256 *h = progcache__sha256_new();
    if (!h)
        return progcache_error_code() ? progcache_error_code() : PROGCACHE_ENOMEM;
    int rc = hash_recipe(h, o, files, num_files, toolkit_id);
    if (rc) {
        progcache__sha256_free(h);
        return rc;
    }
    return progcache__sha256_final(h, out);
}

/* ---- includes that only a digest can cover ---------------------------------- */

typedef struct check_ctx {
    const progcache_key_nvrtc_options *o;
    const char *label;
    unsigned char *visited; /* per header in memory: queued already */
    size_t *queue;          /* headers in memory to scan, in the order reached */
    size_t queued;
} check_ctx;

static int check_one(void *ctx, const progcache__include *inc)
{
    check_ctx *c = ctx;
    const progcache_key_nvrtc_options *o = c->o;
    if (inc->form != PROGCACHE__INCLUDE_COMPUTED) {
        for (size_t i = 0; i < o->num_headers; i++) {
            const progcache_header *h = &o->headers[i];
            if (strlen(h->name) != inc->name_len || memcmp(h->name, inc->name, inc->name_len))
                continue;
            /* Scanned after this text, not from inside its scan: a chain
             * of headers costs no stack. */
            if (!c->visited[i]) {
                c->visited[i] = 1;
                c->queue[c->queued++] = i;
            }
            return PROGCACHE_OK;
        }
    }
    return progcache__error(PROGCACHE_EUNSAFEKEY,
                            "%s:%u: %s%s%.*s%s reads a file whose bytes this key cannot see: "
                            "derive the key with progcache_key_nvrtc_files (as progcache key "
                            "and progcache_compile_or_load do), which reads and covers the "
                            "headers, or pass an extra digest over them",
                            c->label, inc->line,
                            inc->probe  ? "__has_include "
                            : inc->next ? "#include_next "
                                        : "#include ",
                            inc->form == PROGCACHE__INCLUDE_ANGLED ? "<"
                            : inc->form == PROGCACHE__INCLUDE_QUOTED ? "\"" : "",
                            (int)(inc->name_len > 400 ? 400 : inc->name_len), inc->name,
                            inc->form == PROGCACHE__INCLUDE_ANGLED ? ">"
                            : inc->form == PROGCACHE__INCLUDE_QUOTED ? "\"" : "");
}

int progcache__key_check_includes(const progcache_key_nvrtc_options *o)
{
    if (!progcache__may_include(o))
        return PROGCACHE_OK;
    check_ctx c = {o, o->name ? o->name : "default_program", NULL, NULL, 0};
    int rc = PROGCACHE_OK;
    if (o->num_headers && (!(c.visited = progcache__calloc(o->num_headers, 1)) ||
                           !(c.queue = progcache__calloc(o->num_headers, sizeof *c.queue))))
        rc = progcache__error(PROGCACHE_ENOMEM, "out of memory checking the includes");
    size_t len = o->source_len ? o->source_len : strlen(o->source);
    if (!rc)
        rc = progcache__include_scan(o->source, len, check_one, &c);
    char label[512];
    for (size_t next = 0; !rc && next < c.queued; next++) {
        const progcache_header *h = &o->headers[c.queue[next]];
        snprintf(label, sizeof label, "header \"%s\" (in memory)", h->name);
        c.label = label;
        rc = progcache__include_scan(h->content, content_len(h), check_one, &c);
    }
    progcache__free(c.visited);
    progcache__free(c.queue);
    return rc;
}

/* ---- when the digest is taken ---------------------------------------------------- */

static int mentions_include(const char *text, size_t len)
{
    return memmem(text, len, "include", 7) || memmem(text, len, "embed", 5);
}

int progcache__may_include(const progcache_key_nvrtc_options *o)
{
    if (o->num_headers)
        return 1;
    size_t len = o->source_len ? o->source_len : strlen(o->source);
    return mentions_include(o->source, len);
}

int progcache__needs_headers_digest(const progcache_key_nvrtc_options *o,
                                    const progcache__header_scan *scan)
{
    if (o->num_headers || (scan && (scan->num_files || scan->toolkit)))
        return 1;
    if (o->name && (strchr(o->name, '/') || strchr(o->name, '\\')))
        return 1;
    for (size_t i = 0; i < o->num_options; i++)
        if (progcache__option_reads_headers(o->options[i]))
            return 1;
    return 0;
}

int progcache__key_from_scan(unsigned char out[32], const progcache_key_nvrtc_options *o,
                             const progcache__header_scan *scan)
{
    if (!progcache__needs_headers_digest(o, scan))
        return progcache__key_derive(out, o, NULL, 0);
    unsigned char extra[32];
    int rc = progcache__headers_digest(extra, o, scan ? scan->files : NULL,
                                       scan ? scan->num_files : 0,
                                       scan && scan->toolkit ? scan->toolkit_id : NULL);
    return rc ? rc : progcache__key_derive(out, o, extra, sizeof extra);
}

/* Explained misses (docs/OPERATIONS.md, "Explained misses"; issue 35).
 *
 * A key is a SHA-256: once derived, its inputs are gone, and a MISS cannot
 * say what changed. So each entry compile-or-load stores leaves a record
 * of its inputs in the cache directory's explain index
 * (dir/dir_explain.c): one text line under two program identities,
 * the program name with the source's digest (a changed option, NVRTC,
 * target, name expression or header) and the program name alone (a changed
 * source). A MISS that is asked to explain itself reads those two small
 * files, never the directory, and compares.
 *
 * A record, one line of at most 8 KiB (a longer one is not kept):
 *   <key hex> t=<unix time> v=<nvrtc M.m> k=<target> n=<name> s=<source
 *   sha256> h=<headers digest or -> e=<name expression>... o=<option>...
 * Options and name expressions in the caller's order. Every value is
 * escaped (%XX for '%', space and every byte outside 0x21-0x7e), so a line
 * is printable text: what an explanation shows is the escaped form, which
 * no terminal takes for a control sequence. Two values are equal exactly
 * when their escaped forms are. */
#include "program/explain.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "cache/cache_stats.h"
#include "config.h"
#include "cuda/nvrtc_record.h"
#include "error.h"
#include "key/key_options.h"
#include "progcache/cuda.h"
#include "progcache/file.h"
#include "settings_table.h"
#include "sha256.h"
#include "dir/dir.h"

#define NEAREST 3 /* stored entries an explanation names */
#define INDEXES 2

typedef struct span {
    const char *p;
    size_t n;
} span;

/* A parsed record: spans into its line. */
typedef struct record {
    span key, nvrtc, target, source, headers;
    span *items; /* every e= and o= token, in order (tag included) */
    size_t num_items;
    long long when;
} record;

static void record_free(record *r)
{
    progcache__free(r->items);
    memset(r, 0, sizeof *r);
}

static int appendf(progcache_buf *b, const char *fmt, ...) PROGCACHE_PRINTF(2, 3);
static int appendf(progcache_buf *b, const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (n < 0)
        return PROGCACHE_OK;
    return progcache__buf_append(b, text, (size_t)n < sizeof text ? (size_t)n : sizeof text - 1);
}

/* " tag=<escaped value>" */
static int put_value(progcache_buf *b, const char *tag, const void *value, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    int rc = appendf(b, " %s=", tag);
    const unsigned char *v = value;
    for (size_t i = 0; !rc && i < len; i++) {
        if (v[i] > 0x20 && v[i] < 0x7f && v[i] != '%') {
            rc = progcache__buf_append(b, &v[i], 1);
        } else {
            char e[3] = {'%', hex[v[i] >> 4], hex[v[i] & 15]};
            rc = progcache__buf_append(b, e, 3);
        }
    }
    return rc;
}

static int put_digest(progcache_buf *b, const char *tag, const unsigned char d[32])
{
    char hex[65];
    progcache__hex(hex, d, 32);
    return appendf(b, " %s=%s", tag, hex);
}

/* What the key covers besides the fields recorded one by one: the header
 * files read (path and digest), the headers in memory, the toolkit's
 * identity and the caller's digest. 0 when there is none. */
static int headers_digest(unsigned char out[32], const progcache_key_nvrtc_options *o,
                          const progcache__program_key *pk)
{
    const progcache__header_scan *s = pk ? &pk->scan : NULL;
    if (!o->num_headers && !o->extra_digest && !(s && (s->num_files || s->toolkit)))
        return 0;
    progcache__sha256 *h = progcache__sha256_new();
    if (!h)
        return -1;
    int rc = 0;
    for (size_t i = 0; !rc && s && i < s->num_files; i++)
        rc = progcache__sha256_update(h, s->files[i].path, strlen(s->files[i].path) + 1) ||
             progcache__sha256_update(h, s->files[i].sha256, 32);
    if (!rc && s && s->toolkit)
        rc = progcache__sha256_update(h, s->toolkit_id, 32);
    for (size_t i = 0; !rc && i < o->num_headers; i++) {
        const progcache_header *hd = &o->headers[i];
        size_t len = hd->length ? hd->length : hd->content ? strlen(hd->content) : 0;
        const char *name = hd->name ? hd->name : "";
        rc = progcache__sha256_update(h, name, strlen(name) + 1) ||
             (len && progcache__sha256_update(h, hd->content, len));
    }
    if (!rc && o->extra_digest)
        rc = progcache__sha256_update(h, o->extra_digest, o->extra_digest_len);
    if (rc) {
        progcache__sha256_free(h);
        return -1;
    }
    return progcache__sha256_final(h, out) ? -1 : 1; /* final frees h */
}

/* The record line of o under key into out (replaced); *source the
 * source's digest. */
static int encode(progcache_buf *out, unsigned char source[32],
                  const progcache_key_nvrtc_options *o, const progcache__program_key *pk,
                  const unsigned char key[32])
{
    char hex[65];
    unsigned char hd[32];
    out->size = 0;
    size_t len = o->source_len ? o->source_len : o->source ? strlen(o->source) : 0;
    const char *target = progcache_target_name(o->target);
    const char *name = o->name ? o->name : "default_program";
    int have_hd = headers_digest(hd, o, pk);
    if (have_hd < 0 || progcache__sha256_oneshot(source, o->source ? o->source : "", len))
        return PROGCACHE_ENOMEM;
    progcache__hex(hex, key, 32);
    int rc = appendf(out, "%s t=%lld v=%d.%d k=%s", hex, (long long)time(NULL), o->nvrtc_major,
                     o->nvrtc_minor, target ? target : "?");
    rc = rc || put_value(out, "n", name, strlen(name)) || put_digest(out, "s", source);
    rc = rc || (have_hd ? put_digest(out, "h", hd) : appendf(out, " h=-"));
    for (size_t i = 0; !rc && i < o->num_name_expressions; i++)
        rc = put_value(out, "e", o->name_expressions[i],
                       o->name_expressions[i] ? strlen(o->name_expressions[i]) : 0);
    for (size_t i = 0; !rc && i < o->num_options; i++)
        rc = put_value(out, "o", o->options[i], o->options[i] ? strlen(o->options[i]) : 0);
    return rc ? PROGCACHE_ENOMEM : progcache__buf_append(out, "\n", 1);
}

/* The two index identities of a program: [0] name and source, [1] name. */
static int identities(unsigned char out[INDEXES][32], const progcache_key_nvrtc_options *o,
                      const unsigned char source[32])
{
    const char *name = o->name ? o->name : "default_program";
    progcache_buf b = PROGCACHE_BUF_INIT;
    int rc = progcache__buf_append(&b, "progcache-explain 1\nname\n", 25) ||
             progcache__buf_append(&b, name, strlen(name) + 1);
    rc = rc || progcache__sha256_oneshot(out[1], b.data, b.size);
    rc = rc || progcache__buf_append(&b, source, 32) ||
         progcache__sha256_oneshot(out[0], b.data, b.size);
    progcache_buf_free(&b);
    return rc ? PROGCACHE_ENOMEM : PROGCACHE_OK;
}

/* Parse one line (without its "\n"). 0, or -1 for a line that is not a
 * record (skipped: a damaged index costs its records, nothing else). */
static int parse(record *r, const char *line, size_t len)
{
    memset(r, 0, sizeof *r);
    size_t tokens = 1;
    for (size_t i = 0; i < len; i++) {
        /* The writer escapes every byte outside 0x21-0x7e (%XX): a line
         * with another is not a record of ours, and its values (a
         * terminal's escape sequences) are never printed. */
        unsigned char c = (unsigned char)line[i];
        if (c != ' ' && (c < 0x21 || c > 0x7e))
            return -1;
        tokens += c == ' ';
    }
    if (!(r->items = progcache__malloc(tokens * sizeof *r->items)))
        return -1;
    const char *p = line, *end = line + len;
    int fields = 0;
    for (size_t t = 0; p < end; t++) {
        const char *sp = memchr(p, ' ', (size_t)(end - p));
        span s = {p, sp ? (size_t)(sp - p) : (size_t)(end - p)};
        p = sp ? sp + 1 : end;
        if (t == 0) {
            r->key = s;
            fields += s.n == 64;
            continue;
        }
        if (s.n < 2 || s.p[1] != '=')
            continue; /* a field of a later version: ignored */
        span v = {s.p + 2, s.n - 2};
        switch (s.p[0]) {
        case 't': r->when = strtoll(v.p, NULL, 10); break;
        case 'v': r->nvrtc = v; fields++; break;
        case 'k': r->target = v; fields++; break;
        case 's': r->source = v; fields++; break;
        case 'h': r->headers = v; fields++; break;
        case 'e':
        case 'o': r->items[r->num_items++] = s; break;
        default: break;
        }
    }
    if (fields == 5)
        return 0;
    record_free(r);
    return -1;
}

static int same(span a, span b)
{
    return a.n == b.n && !memcmp(a.p, b.p, a.n);
}

/* "-DTILE" of "-DTILE=32", "--gpu-architecture" of "--gpu-architecture=sm_90":
 * what an option sets, to pair a changed value with the old one. */
static span option_name(span s)
{
    const char *eq = memchr(s.p + 2, '=', s.n - 2);
    span n = {s.p + 2, eq ? (size_t)(eq - s.p - 2) : s.n - 2};
    return n;
}

/* One difference more: "; " and the phrase appended to out. */
static int say(progcache_buf *out, int *n, const char *fmt, ...) PROGCACHE_PRINTF(3, 4);
static int say(progcache_buf *out, int *n, const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (len < 0)
        return 0;
    if ((*n)++ && progcache__buf_append(out, "; ", 2))
        return -1;
    return progcache__buf_append(out, text, (size_t)len < sizeof text ? (size_t)len
                                                                     : sizeof text - 1)
               ? -1
               : 0;
}

static const char *item_word(span s)
{
    return s.p[0] == 'o' ? "option" : "name expression";
}

/* The differences of cur from old, as "; "-separated phrases appended to
 * out; how far apart they are (0: nothing differs), or -1 without memory. */
static int differ(progcache_buf *out, const record *cur, const record *old)
{
    int n = 0, rc = 0;
    if (!same(cur->nvrtc, old->nvrtc))
        rc |= say(out, &n, "NVRTC %.*s was %.*s", (int)cur->nvrtc.n, cur->nvrtc.p,
                  (int)old->nvrtc.n, old->nvrtc.p);
    if (!same(cur->target, old->target))
        rc |= say(out, &n, "target %.*s was %.*s", (int)cur->target.n, cur->target.p,
                  (int)old->target.n, old->target.p);
    if (!same(cur->source, old->source))
        rc |= say(out, &n, "source changed");
    if (!same(cur->headers, old->headers))
        rc |= say(out, &n, "%s",
                  old->headers.n == 1   ? "headers now read or given (none were)"
                  : cur->headers.n == 1 ? "no headers now (some were read or given)"
                                        : "headers changed");
    /* Both records are at most PROGCACHE__EXPLAIN_LINE_MAX bytes, and an
     * item takes at least three ("o=" and a space). */
    unsigned char used_old[PROGCACHE__EXPLAIN_LINE_MAX / 3 + 1] = {0};
    unsigned char used_cur[PROGCACHE__EXPLAIN_LINE_MAX / 3 + 1] = {0};
    /* Items in both, wherever they are: not a difference of value. */
    for (size_t i = 0; i < cur->num_items; i++)
        for (size_t j = 0; j < old->num_items; j++)
            if (!used_old[j] && same(cur->items[i], old->items[j])) {
                used_old[j] = used_cur[i] = 1;
                break;
            }
    int moved = 0, all = cur->num_items == old->num_items;
    for (size_t i = 0; all && i < cur->num_items; i++) {
        moved |= !same(cur->items[i], old->items[i]);
        all &= used_cur[i];
    }
    /* The rest: a value changed (the same option name, or name expression,
     * on both sides), added, or not given now. */
    for (size_t i = 0; i < cur->num_items; i++) {
        if (used_cur[i])
            continue;
        span c = cur->items[i];
        size_t k = old->num_items;
        for (size_t j = 0; j < old->num_items && k == old->num_items; j++)
            if (!used_old[j] && old->items[j].p[0] == c.p[0] &&
                same(option_name(old->items[j]), option_name(c)))
                k = j;
        if (k < old->num_items) {
            used_old[k] = 1;
            rc |= say(out, &n, "%s %.*s was %.*s", item_word(c), (int)c.n - 2, c.p + 2,
                      (int)old->items[k].n - 2, old->items[k].p + 2);
        } else {
            rc |= say(out, &n, "%s %.*s added", item_word(c), (int)c.n - 2, c.p + 2);
        }
    }
    for (size_t j = 0; j < old->num_items; j++)
        if (!used_old[j])
            rc |= say(out, &n, "%s %.*s not given now", item_word(old->items[j]),
                      (int)old->items[j].n - 2, old->items[j].p + 2);
    if (all && moved)
        rc |= say(out, &n, "the same options in another order (the order is in the key)");
    /* A distance: each difference 2, an order alone 1 (nearer than a value
     * changed). 0: none. */
    return rc ? -1 : 2 * n - (all && moved);
}

/* The trusted records of the program's two index files, newest first,
 * each key once, into recs (at most INDEXES * PROGCACHE__EXPLAIN_KEEP). */
static size_t load(record *recs, progcache_buf texts[INDEXES], progcache_file *dir,
                   const unsigned char ids[INDEXES][32])
{
    size_t n = 0;
    for (int x = 0; x < INDEXES; x++) {
        if (progcache__file_explain_read(dir, ids[x], &texts[x]))
            continue;
        const char *p = (const char *)texts[x].data, *end = p + texts[x].size;
        while (p < end && n < INDEXES * PROGCACHE__EXPLAIN_KEEP) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            size_t len = (size_t)(nl - p); /* whole lines only */
            record r;
            int dup = 0;
            if (len <= PROGCACHE__EXPLAIN_LINE_MAX && !parse(&r, p, len)) {
                for (size_t i = 0; i < n && !dup; i++)
                    dup = same(recs[i].key, r.key);
                if (dup)
                    record_free(&r); /* in both indexes: once */
                else
                    recs[n++] = r;
            }
            p = nl + 1;
        }
    }
    return n;
}

/* "41 s", "12 min", "3 h", "5 d": how long ago a record was written. */
static void ago(char *out, size_t len, long long s)
{
    if (s < 0)
        s = 0;
    if (s < 120)
        snprintf(out, len, "%lld s", s);
    else if (s < 7200)
        snprintf(out, len, "%lld min", s / 60);
    else if (s < 172800)
        snprintf(out, len, "%lld h", s / 3600);
    else
        snprintf(out, len, "%lld d", s / 86400);
}

int progcache__explain_text(progcache_buf *out, progcache *cache,
                            const progcache_key_nvrtc_options *o,
                            const progcache__program_key *pk, const unsigned char key[32])
{
    progcache_buf line = PROGCACHE_BUF_INIT, scratch = PROGCACHE_BUF_INIT;
    progcache_buf texts[INDEXES] = {PROGCACHE_BUF_INIT, PROGCACHE_BUF_INIT};
    record recs[INDEXES * PROGCACHE__EXPLAIN_KEEP], cur = {0};
    int dist[INDEXES * PROGCACHE__EXPLAIN_KEEP];
    size_t n = 0;
    unsigned char source[32], ids[INDEXES][32];
    out->size = 0;
    int rc = encode(&line, source, o, pk, key);
    if (!rc)
        rc = identities(ids, o, source);
    if (!rc && parse(&cur, (const char *)line.data, line.size - 1))
        rc = PROGCACHE_ENOMEM;
    if (rc)
        goto done;
    if (line.size > PROGCACHE__EXPLAIN_LINE_MAX) {
        /* Never recorded either (progcache__explain_note). */
        rc = appendf(out, "MISS of program \"%s\": its inputs are longer than the explain "
                     "index keeps (%zu bytes), so nothing is recorded to compare with\n",
                     o->name ? o->name : "default_program", PROGCACHE__EXPLAIN_LINE_MAX);
        goto done;
    }
    progcache_file *dir = cache ? progcache_store_as_file(progcache__cache_home(cache)) : NULL;
    if (dir)
        n = load(recs, texts, dir, ids);
    char hex[65];
    progcache__hex(hex, key, 32);
    const char *name = o->name ? o->name : "default_program";
    rc = appendf(out, "MISS %.16s... of program \"%s\" (%.*s, NVRTC %.*s): ", hex, name,
                 (int)cur.target.n, cur.target.p, (int)cur.nvrtc.n, cur.nvrtc.p);
    for (size_t i = 0; !rc && i < n; i++) {
        scratch.size = 0;
        if ((dist[i] = differ(&scratch, &cur, &recs[i])) < 0)
            rc = PROGCACHE_ENOMEM;
    }
    if (!rc && !n)
        rc = appendf(out, "nothing similar is recorded in %s (no entry of this program name "
                     "was stored by progcache since the explain index began; cuda.core's "
                     "entries are not recorded)\n",
                     dir ? progcache_path(cache) ? progcache_path(cache) : "the cache"
                         : "a cache without a directory");
    else if (!rc)
        rc = appendf(out, "the nearest stored entries of the program:\n");
    /* The NEAREST with the fewest differences; on a tie, the same source's
     * first, then the newer (each index is newest first). */
    for (int shown = 0; !rc && shown < NEAREST; shown++) {
        size_t best = n;
        for (size_t i = 0; i < n; i++)
            if (dist[i] >= 0 && (best == n || dist[i] < dist[best]))
                best = i;
        if (best == n)
            break;
        record *r = &recs[best];
        char when[32];
        ago(when, sizeof when, (long long)time(NULL) - r->when);
        rc = appendf(out, "  %.16s... stored %s ago: ", r->key.p, when);
        int d = rc ? -1 : differ(out, &cur, r);
        if (d == 0)
            rc = appendf(out, same(r->key, cur.key)
                                  ? "these very inputs: its entry is gone (evicted, removed, "
                                    "or not one this user trusts)"
                                  : "the same recorded inputs, another key (what the key "
                                    "covers beyond them changed: the key schema)");
        rc = rc || d < 0 || appendf(out, "\n");
        dist[best] = -1;
    }
    if (!rc)
        progcache__cache_record(cache, PROGCACHE_STAT_EXPLAIN_MADE, 1);
done:
    for (size_t i = 0; i < n; i++)
        record_free(&recs[i]);
    record_free(&cur);
    progcache_buf_free(&line);
    progcache_buf_free(&scratch);
    for (int x = 0; x < INDEXES; x++)
        progcache_buf_free(&texts[x]);
    return rc ? progcache__error(PROGCACHE_ENOMEM, "out of memory explaining a miss") : 0;
}

void progcache__explain_note(progcache *cache, const progcache_key_nvrtc_options *o,
                             const progcache__program_key *pk, const unsigned char key[32],
                             progcache_log_fn log, void *log_ctx)
{
    progcache_file *dir = cache ? progcache_store_as_file(progcache__cache_home(cache)) : NULL;
    if (!dir || progcache__cache_writes_off(cache) || progcache__cache_foreign(cache))
        return;
    progcache__error_saved saved;
    progcache__error_save(&saved);
    progcache_buf line = PROGCACHE_BUF_INIT;
    unsigned char source[32], ids[INDEXES][32];
    int rc = encode(&line, source, o, pk, key);
    if (!rc)
        rc = identities(ids, o, source);
    /* A record too long for the index (thousands of options) is not kept:
     * that program's misses say that nothing similar is recorded. */
    for (int x = 0; !rc && line.size <= PROGCACHE__EXPLAIN_LINE_MAX && x < INDEXES; x++)
        rc = progcache__file_explain_add(dir, ids[x], (const char *)line.data, line.size);
    if (rc)
        progcache__log(log, log_ctx, PROGCACHE_LOG_INFO,
                       "progcache: could not record the inputs of the entry for explained "
                       "misses: %s",
                       progcache_error_last());
    progcache_buf_free(&line);
    progcache__error_restore(&saved);
}

void progcache__explain_miss(progcache *cache, const progcache_key_nvrtc_options *o,
                             const progcache__program_key *pk, const unsigned char key[32],
                             progcache_log_fn log, void *log_ctx)
{
    uint64_t on = 0;
    const char *value = NULL, *why = NULL;
    if (!cache || progcache__config_setting(&on, &value, &why, PROGCACHE__SET_EXPLAIN) ||
        !on)
        return;
    progcache__error_saved saved;
    progcache__error_save(&saved);
    progcache_buf text = PROGCACHE_BUF_INIT;
    /* A program without a log callback of its own hears it through the
     * cache's (progcache warm's, which prints it), else the default. */
    if (!log)
        progcache__cache_log_of(cache, &log, &log_ctx);
    if (!progcache__explain_text(&text, cache, o, pk, key) && text.size) {
        text.data[--text.size] = '\0'; /* the last "\n": the log adds its own */
        progcache__log_asked(log, log_ctx, (const char *)text.data);
    }
    progcache_buf_free(&text);
    progcache__error_restore(&saved);
}

int progcache_explain(progcache_buf *out, progcache *cache,
                      const progcache_key_nvrtc_options *nvrtc)
{
    if (!out || !nvrtc)
        return progcache__error(PROGCACHE_EINVAL, "progcache_explain: %s is NULL",
                                out ? "nvrtc" : "out");
    progcache_key_nvrtc_options o;
    int rc = progcache__key_load(&o, nvrtc, "progcache_explain");
    const char *how = NULL;
    if (!rc && !o.nvrtc_major && !o.nvrtc_minor)
        rc = progcache__nvrtc_key_version(&o.nvrtc_major, &o.nvrtc_minor, &how, cache);
    progcache__program_key pk = PROGCACHE__PROGRAM_KEY_INIT;
    unsigned char key[32];
    if (!rc)
        rc = progcache__program_key_derive(key, &pk, cache, &o);
    if (!rc && cache && progcache__cache_holds(cache, key, sizeof key)) {
        char hex[65];
        progcache__hex(hex, key, sizeof key);
        out->size = 0;
        rc = appendf(out, "HIT %.16s... of program \"%s\": an entry of these inputs is stored\n",
                     hex, o.name ? o.name : "default_program")
                 ? progcache__error(PROGCACHE_ENOMEM, "progcache_explain: out of memory")
                 : PROGCACHE_OK;
    } else if (!rc) {
        rc = progcache__explain_text(out, cache, &o, &pk, key);
    }
    progcache__program_key_free(&pk);
    return rc;
}

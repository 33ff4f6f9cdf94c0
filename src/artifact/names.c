/* The lowered names record: which kernel a name expression became.
 *
 * NVRTC lowers a name expression ("matmul<16, Relu>") to the mangled name
 * of what it instantiated ("_Z6matmulILi16E4ReluEvPKfS2_Pf") only while it
 * compiles; a cache hit skips the compile, so the pairs are kept with the
 * entry as a record (PROGCACHE_RECORD_LOWERED_NAMES), never in its bytes,
 * which stay exactly what cuda.core reads. Layout (docs/FORMAT.md):
 * pairs of NUL-terminated strings, the tagged expression ("s:" or "b:",
 * as the key tags it) then its lowered name, sorted by the tagged
 * expression, without repeats, nothing else.
 *
 * Entries written without the record (by cuda.core, by an older
 * progcache) may still be used by name when the artifact's own kernels
 * say which one it is beyond doubt (progcache__names_from_kernels);
 * otherwise compile-or-load compiles once to learn the names. */
#include "artifact/names.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "buf.h"
#include "error.h"
#include "progcache/artifact.h"

/* ---- the record -------------------------------------------------------------- */

typedef struct pair {
    const char *expr;
    const char *lowered;
} pair;

static int by_expr(const void *a, const void *b)
{
    return strcmp(((const pair *)a)->expr, ((const pair *)b)->expr);
}

int progcache__names_encode(progcache_buf *out, const char *const *exprs,
                            const char *const *lowered, size_t n, int bytes_tag)
{
    out->size = 0;
    if (!n)
        return progcache__buf_reserve(out, 0);
    pair *pairs = progcache__calloc(n, sizeof *pairs);
    if (!pairs)
        return progcache__error(PROGCACHE_ENOMEM, "out of memory recording lowered names");
    for (size_t i = 0; i < n; i++)
        pairs[i] = (pair){exprs[i], lowered[i]};
    qsort(pairs, n, sizeof *pairs, by_expr);
    const char *tag = bytes_tag ? "b:" : "s:";
    int rc = PROGCACHE_OK;
    for (size_t i = 0; i < n && !rc; i++) {
        if (i && !strcmp(pairs[i].expr, pairs[i - 1].expr))
            continue;
        if ((rc = progcache__buf_append(out, tag, 2)) ||
            (rc = progcache__buf_append(out, pairs[i].expr, strlen(pairs[i].expr) + 1)))
            break;
        rc = progcache__buf_append(out, pairs[i].lowered, strlen(pairs[i].lowered) + 1);
    }
    progcache__free(pairs);
    return rc;
}

/* A NUL-terminated string at *pos inside len bytes, or NULL. */
static const char *string_at(const unsigned char *rec, size_t len, size_t *pos)
{
    if (*pos >= len)
        return NULL;
    const unsigned char *end = memchr(rec + *pos, '\0', len - *pos);
    if (!end)
        return NULL;
    const char *s = (const char *)rec + *pos;
    *pos = (size_t)(end - rec) + 1;
    return s;
}

int progcache__names_next(const unsigned char *rec, size_t len, size_t *pos, const char **expr,
                          const char **lowered)
{
    if (!rec || *pos >= len)
        return 0;
    const char *e = string_at(rec, len, pos);
    const char *l = e ? string_at(rec, len, pos) : NULL;
    if (!e || !l || strlen(e) < 2 || (e[0] != 's' && e[0] != 'b') || e[1] != ':' || !l[0])
        return -1;
    *expr = e;
    *lowered = l;
    return 1;
}

int progcache_lowered_names_next(const unsigned char *record, size_t len, size_t *pos,
                                 const char **expression, const char **lowered)
{
    if (!pos || !expression || !lowered)
        return PROGCACHE_ECORRUPT;
    int r = progcache__names_next(record, len, pos, expression, lowered);
    return r < 0 ? PROGCACHE_ECORRUPT : r;
}

const char *progcache__names_find(const unsigned char *rec, size_t len, const char *expr,
                                  int bytes_tag)
{
    size_t pos = 0;
    const char *e, *l, *found = NULL;
    int r;
    char tag = bytes_tag ? 'b' : 's';
    /* The whole record is checked, not only up to the match: one that is
     * not well formed anywhere is not used at all. */
    while ((r = progcache__names_next(rec, len, &pos, &e, &l)) == 1)
        if (!found && e[0] == tag && !strcmp(e + 2, expr))
            found = l;
    return r == 0 ? found : NULL;
}

/* ---- without the record: the artifact's kernels -------------------------------- */

static int ident_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static int ident_char(char c) { return ident_start(c) || (c >= '0' && c <= '9'); }
static int digit(char c) { return c >= '0' && c <= '9'; }

/* Whether s is a plain C identifier. */
static int plain_ident(const char *s)
{
    if (!ident_start(*s))
        return 0;
    while (*++s)
        if (!ident_char(*s))
            return 0;
    return 1;
}

/* Whether mangled could name a C++ entity whose unqualified name is id:
 * it holds id's source name (<length><id>) not preceded by a digit.
 * Errs towards yes. */
static int could_name(const char *mangled, const char *id)
{
    char pattern[32];
    size_t n = strlen(id);
    int w = snprintf(pattern, sizeof pattern, "%zu", n);
    if (w < 0 || (size_t)w >= sizeof pattern)
        return 1;
    for (const char *p = mangled; (p = strstr(p, pattern)) != NULL; p++)
        if ((p == mangled || !digit(p[-1])) && !strncmp(p + w, id, n))
            return 1;
    return 0;
}

#define MAX_PARTS 16
#define PART_MAX 256

typedef struct qname {
    size_t n;
    char part[MAX_PARTS][PART_MAX];
    int templated; /* the last part has template arguments */
} qname;

/* "ns::f<16, Relu>", "&f", "::f": the qualified name of a function, its
 * scopes plain identifiers. 0, or -1 for anything else. */
static int parse_expr(qname *q, const char *s)
{
    memset(q, 0, sizeof *q);
    while (*s == ' ' || *s == '&')
        s++;
    if (s[0] == ':' && s[1] == ':')
        s += 2;
    for (;;) {
        if (q->n == MAX_PARTS || !ident_start(*s))
            return -1;
        size_t len = 0;
        while (ident_char(s[len]))
            len++;
        if (len >= PART_MAX)
            return -1;
        memcpy(q->part[q->n++], s, len);
        s += len;
        while (*s == ' ')
            s++;
        if (s[0] == ':' && s[1] == ':') {
            s += 2;
            while (*s == ' ')
                s++;
            continue;
        }
        if (*s == '<')
            q->templated = 1;
        else if (*s)
            return -1;
        return 0;
    }
}

/* "_Z6matmulILi16E..." -> matmul (templated); "_ZN2ns1fIiEEvv" -> ns, f
 * (templated); "_Z1kv" -> k. 0, or -1 for anything this reader does not
 * know (substitutions, std::, operators, ...). */
static int parse_mangled(qname *q, const char *m)
{
    memset(q, 0, sizeof *q);
    if (strncmp(m, "_Z", 2))
        return -1;
    m += 2;
    int nested = *m == 'N';
    if (nested)
        m++;
    if (*m == 'L')
        m++; /* internal linkage */
    for (;;) {
        if (!digit(*m) || *m == '0' || q->n == MAX_PARTS)
            return -1;
        size_t len = 0;
        while (digit(*m)) {
            len = len * 10 + (size_t)(*m++ - '0');
            if (len >= PART_MAX)
                return -1;
        }
        for (size_t i = 0; i < len; i++)
            if (!m[i] || !ident_char(m[i]))
                return -1;
        memcpy(q->part[q->n++], m, len);
        m += len;
        if (nested && digit(*m))
            continue;
        q->templated = *m == 'I';
        if (nested && *m != 'I' && *m != 'E')
            return -1;
        return 0;
    }
}

const char *progcache__names_from_kernels(const char *expr, size_t num_exprs,
                                          const progcache_buf *kernels, size_t num_kernels)
{
    const char *k = kernels && kernels->data ? (const char *)kernels->data : NULL;
    if (!k || !expr)
        return NULL;
    const char *id = expr;
    while (*id == '&' || *id == ' ')
        id++;
    if (plain_ident(id)) {
        const char *exact = NULL;
        const char *p = k;
        for (size_t i = 0; i < num_kernels; i++, p += strlen(p) + 1)
            if (!strcmp(p, id))
                exact = p;
        if (exact) {
            p = k;
            for (size_t i = 0; i < num_kernels; i++, p += strlen(p) + 1)
                if (p != exact && could_name(p, id))
                    return NULL;
            return exact;
        }
    }
    if (num_exprs != 1 || num_kernels != 1)
        return NULL;
    qname want, have;
    if (parse_expr(&want, expr) || parse_mangled(&have, k) || want.n != have.n ||
        want.templated != have.templated)
        return NULL;
    for (size_t i = 0; i < want.n; i++)
        if (strcmp(want.part[i], have.part[i]))
            return NULL;
    return k;
}

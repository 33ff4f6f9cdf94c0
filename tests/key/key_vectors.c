/* A small JSON parser, enough for the reference vectors: objects, arrays,
 * strings (every escape, including \uXXXX surrogate pairs, decoded to
 * UTF-8), null, true, false and numbers (skipped). */
#include "key_vectors.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

enum { J_NULL, J_STRING, J_ARRAY, J_OBJECT, J_OTHER };

typedef struct jvalue {
    int type;
    char *str; /* J_STRING: decoded, NUL-terminated */
    size_t len;
    struct jvalue *items; /* J_ARRAY / J_OBJECT values */
    char **keys;          /* J_OBJECT keys */
    size_t n;
} jvalue;

typedef struct parser {
    const char *p;
    const char *end;
    const char *error;
} parser;

static void skip_ws(parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\r' || *ps->p == '\n'))
        ps->p++;
}

static int fail(parser *ps, const char *why)
{
    if (!ps->error)
        ps->error = why;
    return -1;
}

static int hex4(parser *ps, unsigned *out)
{
    if (ps->end - ps->p < 4)
        return fail(ps, "short \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = *ps->p++;
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return fail(ps, "bad hex digit in \\u escape");
    }
    *out = v;
    return 0;
}

static size_t put_utf8(char *dst, unsigned cp)
{
    if (cp < 0x80) {
        dst[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        dst[0] = (char)(0xC0 | cp >> 6);
        dst[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        dst[0] = (char)(0xE0 | cp >> 12);
        dst[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        dst[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    dst[0] = (char)(0xF0 | cp >> 18);
    dst[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    dst[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    dst[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

static int parse_string(parser *ps, char **out, size_t *out_len)
{
    ps->p++; /* opening quote */
    /* Decoded text is never longer than the escaped text. */
    char *buf = malloc((size_t)(ps->end - ps->p) + 1);
    size_t n = 0;
    CHECK(buf != NULL);
    while (ps->p < ps->end && *ps->p != '"') {
        char c = *ps->p++;
        if ((unsigned char)c < 0x20) {
            free(buf);
            return fail(ps, "control character in string");
        }
        if (c != '\\') {
            buf[n++] = c;
            continue;
        }
        if (ps->p >= ps->end)
            break;
        c = *ps->p++;
        unsigned cp, lo;
        switch (c) {
        case '"': buf[n++] = '"'; break;
        case '\\': buf[n++] = '\\'; break;
        case '/': buf[n++] = '/'; break;
        case 'b': buf[n++] = '\b'; break;
        case 'f': buf[n++] = '\f'; break;
        case 'n': buf[n++] = '\n'; break;
        case 'r': buf[n++] = '\r'; break;
        case 't': buf[n++] = '\t'; break;
        case 'u':
            if (hex4(ps, &cp)) {
                free(buf);
                return -1;
            }
            if (cp >= 0xD800 && cp < 0xDC00) {
                if (ps->end - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u') {
                    free(buf);
                    return fail(ps, "high surrogate without a low one");
                }
                ps->p += 2;
                if (hex4(ps, &lo) || lo < 0xDC00 || lo > 0xDFFF) {
                    free(buf);
                    return fail(ps, "bad low surrogate");
                }
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp < 0xE000) {
                free(buf);
                return fail(ps, "lone low surrogate");
            }
            n += put_utf8(buf + n, cp);
            break;
        default: free(buf); return fail(ps, "unknown escape");
        }
    }
    if (ps->p >= ps->end) {
        free(buf);
        return fail(ps, "unterminated string");
    }
    ps->p++; /* closing quote */
    buf[n] = '\0';
    *out = buf;
    *out_len = n;
    return 0;
}

static void jfree(jvalue *v)
{
    free(v->str);
    for (size_t i = 0; i < v->n; i++) {
        jfree(&v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    memset(v, 0, sizeof *v);
}

static int parse_value(parser *ps, jvalue *out, int depth);

static int parse_list(parser *ps, jvalue *out, int depth, char close, int with_keys)
{
    ps->p++;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        return 0;
    }
    for (;;) {
        out->items = realloc(out->items, (out->n + 1) * sizeof *out->items);
        CHECK(out->items != NULL);
        memset(&out->items[out->n], 0, sizeof out->items[0]);
        if (with_keys) {
            out->keys = realloc(out->keys, (out->n + 1) * sizeof *out->keys);
            CHECK(out->keys != NULL);
            out->keys[out->n] = NULL;
            size_t klen;
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != '"')
                return fail(ps, "object key is not a string");
            if (parse_string(ps, &out->keys[out->n], &klen))
                return -1;
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':')
                return fail(ps, "missing ':'");
            ps->p++;
        }
        out->n++;
        if (parse_value(ps, &out->items[out->n - 1], depth + 1))
            return -1;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == close) {
            ps->p++;
            return 0;
        }
        return fail(ps, "expected ',' or a closing bracket");
    }
}

static int parse_value(parser *ps, jvalue *out, int depth)
{
    if (depth > 32)
        return fail(ps, "nested too deeply");
    skip_ws(ps);
    if (ps->p >= ps->end)
        return fail(ps, "unexpected end");
    switch (*ps->p) {
    case '"': out->type = J_STRING; return parse_string(ps, &out->str, &out->len);
    case '[': out->type = J_ARRAY; return parse_list(ps, out, depth, ']', 0);
    case '{': out->type = J_OBJECT; return parse_list(ps, out, depth, '}', 1);
    default: break;
    }
    if (ps->end - ps->p >= 4 && !memcmp(ps->p, "null", 4)) {
        ps->p += 4;
        out->type = J_NULL;
        return 0;
    }
    /* true, false, numbers: not needed, skipped. */
    const char *start = ps->p;
    while (ps->p < ps->end && strchr("+-.0123456789eEtrufalsE", *ps->p))
        ps->p++;
    if (ps->p == start)
        return fail(ps, "unexpected character");
    out->type = J_OTHER;
    return 0;
}

static const jvalue *member(const jvalue *obj, const char *key)
{
    for (size_t i = 0; i < obj->n; i++)
        if (!strcmp(obj->keys[i], key))
            return &obj->items[i];
    return NULL;
}

static char *take_string(const jvalue *obj, const char *key, size_t *len)
{
    const jvalue *v = member(obj, key);
    if (!v || v->type != J_STRING)
        return NULL;
    char *s = malloc(v->len + 1);
    CHECK(s != NULL);
    memcpy(s, v->str, v->len + 1);
    if (len)
        *len = v->len;
    return s;
}

static int take_string_list(const jvalue *obj, const char *key, char ***out, size_t *n)
{
    const jvalue *v = member(obj, key);
    if (!v || v->type != J_ARRAY)
        return -1;
    *out = calloc(v->n + 1, sizeof **out);
    CHECK(*out != NULL);
    for (size_t i = 0; i < v->n; i++) {
        if (v->items[i].type != J_STRING)
            return -1;
        (*out)[i] = malloc(v->items[i].len + 1);
        CHECK((*out)[i] != NULL);
        memcpy((*out)[i], v->items[i].str, v->items[i].len + 1);
    }
    *n = v->n;
    return 0;
}

unsigned char *key_vectors_unhex(const char *hex, size_t *len)
{
    size_t n = strlen(hex);
    if (n % 2)
        return NULL;
    unsigned char *out = malloc(n / 2 + 1);
    CHECK(out != NULL);
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1) {
            free(out);
            return NULL;
        }
        out[i] = (unsigned char)v;
    }
    *len = n / 2;
    return out;
}

static int fill_vector(key_vector *kv, const jvalue *obj)
{
    kv->rejected = take_string(obj, "rejected", NULL);
    if (kv->rejected) {
        kv->is_rejected = 1;
        kv->error = take_string(obj, "error", NULL);
        kv->msg = take_string(obj, "msg", NULL);
        return 0;
    }
    kv->code = take_string(obj, "code", &kv->code_len);
    kv->target = take_string(obj, "target", NULL);
    kv->options_name = take_string(obj, "options_name", NULL);
    kv->key_hex = take_string(obj, "key_hex", NULL);
    if (!kv->code || !kv->target || !kv->options_name || !kv->key_hex)
        return -1;
    if (take_string_list(obj, "nvrtc_argv", &kv->argv, &kv->argc) ||
        take_string_list(obj, "name_expressions", &kv->names, &kv->num_names))
        return -1;
    const jvalue *d = member(obj, "extra_digest_hex");
    if (!d)
        return -1;
    if (d->type == J_STRING) {
        kv->digest = key_vectors_unhex(d->str, &kv->digest_len);
        if (!kv->digest)
            return -1;
    }
    return 0;
}

int key_vectors_load(key_vector **out, const char *path)
{
    size_t size;
    char *text = test_read_file(path, &size);
    if (!text) {
        fprintf(stderr, "cannot read %s\n", path);
        return -1;
    }
    key_vector *v = NULL;
    int n = 0, line = 0, rc = 0;
    char *cur = text, *end = text + size;
    while (cur < end) {
        char *nl = memchr(cur, '\n', (size_t)(end - cur));
        char *line_end = nl ? nl : end;
        line++;
        parser ps = {cur, line_end, NULL};
        skip_ws(&ps);
        if (ps.p < ps.end) {
            jvalue root;
            memset(&root, 0, sizeof root);
            int bad = parse_value(&ps, &root, 0);
            skip_ws(&ps);
            if (!bad && (root.type != J_OBJECT || ps.p != ps.end))
                bad = fail(&ps, "line is not one JSON object");
            v = realloc(v, (size_t)(n + 1) * sizeof *v);
            CHECK(v != NULL);
            memset(&v[n], 0, sizeof v[n]);
            v[n].line = line;
            if (!bad && fill_vector(&v[n], &root))
                bad = fail(&ps, "missing or mistyped field");
            n++;
            jfree(&root);
            if (bad) {
                fprintf(stderr, "%s:%d: %s\n", path, line, ps.error);
                rc = -1;
                break;
            }
        }
        cur = line_end + 1;
    }
    free(text);
    if (rc) {
        key_vectors_free(v, n);
        return -1;
    }
    *out = v;
    return n;
}

static void free_list(char **list, size_t n)
{
    if (!list)
        return;
    for (size_t i = 0; i < n; i++)
        free(list[i]);
    free(list);
}

void key_vectors_free(key_vector *v, int n)
{
    for (int i = 0; i < n; i++) {
        free(v[i].code);
        free(v[i].target);
        free_list(v[i].argv, v[i].argc);
        free(v[i].options_name);
        free_list(v[i].names, v[i].num_names);
        free(v[i].digest);
        free(v[i].key_hex);
        free(v[i].rejected);
        free(v[i].error);
        free(v[i].msg);
    }
    free(v);
}

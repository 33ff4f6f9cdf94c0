/* Walking the Redis key space under the store's prefix (SCAN), for the
 * calls that look at every entry: clear, count and total_size, and for
 * `progcache remote` (leases held now). Slow on a large server, and never
 * on the hot path. */
#include "store/redis/redis_store.h"

#include <stdio.h>
#include <string.h>

#include "alloc.h"

#define SCAN_COUNT "1000"

typedef progcache__redis_store redis_store;
typedef progcache__redis_failure failure;

/* A glob pattern matching every name under the prefix followed by kind:
 * the prefix with glob characters escaped, kind, then '*'. */
static void prefix_pattern(char *out, size_t size, const redis_store *s, const char *kind)
{
    size_t n = 0;
    for (size_t i = 0; i < s->cfg.prefix_len && n + 3 < size; i++) {
        char ch = s->cfg.prefix[i];
        if (ch == '*' || ch == '?' || ch == '[' || ch == ']' || ch == '\\')
            out[n++] = '\\';
        out[n++] = ch;
    }
    snprintf(out + n, size - n, "%s*", kind);
}

/* Whether k is "<prefix><kind><64 lowercase hex digits>". */
int progcache__redis_is_name(const redis_store *s, const char *kind, const redisReply *k)
{
    size_t kind_len = strlen(kind), at = s->cfg.prefix_len + kind_len;
    if (k->type != REDIS_REPLY_STRING || k->len != at + PROGCACHE__REDIS_HEX_LEN)
        return 0;
    for (size_t i = at; i < k->len; i++)
        if (!((k->str[i] >= '0' && k->str[i] <= '9') || (k->str[i] >= 'a' && k->str[i] <= 'f')))
            return 0;
    return 1;
}

int progcache__redis_scan(redis_store *s, const char *kind, progcache__redis_batch_fn batch,
                          void *ctx, const char *fn)
{
    char cursor[32] = "0", pattern[2 * PROGCACHE__REDIS_MAX_PREFIX + 16];
    failure f;
    if (progcache__redis_off(s))
        return progcache__redis_off_error(s, fn);
    prefix_pattern(pattern, sizeof pattern, s, kind);
    do {
        const char *argv[] = {"SCAN", cursor, "MATCH", pattern, "COUNT", SCAN_COUNT};
        redisReply *r = progcache__redis_call(s, 6, argv, NULL, 1, &progcache__redis_page, &f);
        if (!r)
            return progcache__redis_remote_error(s, fn, &f);
        int ok = r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
                 r->element[0]->type == REDIS_REPLY_STRING &&
                 r->element[0]->len < sizeof cursor && r->element[1]->type == REDIS_REPLY_ARRAY;
        int rc = PROGCACHE_OK;
        char shape[128];
        progcache__redis_describe(shape, sizeof shape, r);
        f.what[0] = '\0';
        if (ok && r->element[1]->elements)
            rc = batch(ctx, s, r->element[1], &f);
        if (ok)
            memcpy(cursor, r->element[0]->str, r->element[0]->len + 1);
        freeReplyObject(r);
        if (!ok)
            return progcache__error(PROGCACHE_EREMOTE,
                                    "%s: Redis %s: SCAN answered %s, not a cursor and a list of "
                                    "names",
                                    fn, s->cfg.where, shape);
        if (rc == PROGCACHE_EREMOTE && f.what[0])
            return progcache__redis_remote_error(s, fn, &f);
        if (rc)
            return rc;
    } while (strcmp(cursor, "0") != 0);
    return PROGCACHE_OK;
}

/* Run one command over a batch of names: argv0..argv[first-1] fixed, then
 * the names that pass keep(); numkeys_at > 0: that argument is set to the
 * number of names (EVAL). The reply, or NULL (nothing to do: *rc 0; a
 * failure: *rc set). */
static redisReply *over_names(redis_store *s, const char *const *head, size_t first,
                              size_t numkeys_at, const redisReply *keys,
                              int (*keep)(const redis_store *, const redisReply *), failure *f,
                              int *rc)
{
    size_t argc = 0, cap = keys->elements + first;
    const char **argv = progcache__calloc(cap, sizeof *argv);
    size_t *lens = progcache__calloc(cap, sizeof *lens);
    char numkeys[24];
    redisReply *r = NULL;
    *rc = PROGCACHE_OK;
    if (!argv || !lens) {
        *rc = progcache__error(PROGCACHE_ENOMEM, "out of memory scanning Redis");
        goto done;
    }
    for (; argc < first; argc++) {
        argv[argc] = head[argc];
        lens[argc] = strlen(head[argc]);
    }
    for (size_t i = 0; i < keys->elements; i++) {
        const redisReply *k = keys->element[i];
        if (k->type == REDIS_REPLY_STRING && keep(s, k)) {
            argv[argc] = k->str;
            lens[argc++] = k->len;
        }
    }
    if (argc == first)
        goto done;
    if (numkeys_at) {
        snprintf(numkeys, sizeof numkeys, "%zu", argc - first);
        argv[numkeys_at] = numkeys;
        lens[numkeys_at] = strlen(numkeys);
    }
    r = progcache__redis_call(s, (int)argc, argv, lens, 1, &progcache__redis_small, f);
    if (!r)
        *rc = PROGCACHE_EREMOTE;
done:
    progcache__free(argv);
    progcache__free(lens);
    return r;
}

/* ---- clear -------------------------------------------------------------- */

static int any_name(const redis_store *s, const redisReply *k)
{
    (void)s;
    (void)k;
    return 1;
}

static int delete_batch(void *ctx, redis_store *s, const redisReply *keys, failure *f)
{
    (void)ctx;
    static const char *const head[] = {"UNLINK"};
    int rc;
    freeReplyObject(over_names(s, head, 1, 0, keys, any_name, f, &rc)); /* NULL-safe */
    return rc;
}

int progcache__redis_delete_all(redis_store *s, const char *fn)
{
    return progcache__redis_scan(s, "", delete_batch, NULL, fn);
}

/* ---- count and total size ----------------------------------------------- */

/* Count and sum payload sizes of the entries among names, reading only
 * each envelope's 16-byte header, on the server. */
static const char SIZE_SCRIPT[] =
    "local n, t = 0, 0\n"
    "for _, k in ipairs(KEYS) do\n"
    "  local h = redis.call('GETRANGE', k, 0, 15)\n"
    "  if #h == 16 and string.sub(h, 1, 4) == 'pcEV' then\n"
    "    local v = 0\n"
    "    for i = 16, 9, -1 do v = v * 256 + string.byte(h, i) end\n"
    "    n, t = n + 1, t + v\n"
    "  end\n"
    "end\n"
    "return {n, t}\n";

static int entry_name(const redis_store *s, const redisReply *k)
{
    return progcache__redis_is_name(s, "", k);
}

static int measure_batch(void *ctx, redis_store *s, const redisReply *keys, failure *f)
{
    uint64_t *sums = ctx;
    static const char *const head[] = {"EVAL", SIZE_SCRIPT, "0"};
    int rc;
    redisReply *r = over_names(s, head, 3, 2, keys, entry_name, f, &rc);
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[0]->type == REDIS_REPLY_INTEGER && r->element[1]->type == REDIS_REPLY_INTEGER) {
        sums[0] += (uint64_t)r->element[0]->integer;
        sums[1] += (uint64_t)r->element[1]->integer;
    } else if (r) {
        char shape[128];
        progcache__redis_describe(shape, sizeof shape, r);
        snprintf(f->what, sizeof f->what, "EVAL (sizes of entries) answered %s, not two integers",
                 shape);
        rc = PROGCACHE_EREMOTE;
    }
    freeReplyObject(r);
    return rc;
}

int progcache__redis_measure(redis_store *s, uint64_t *count, uint64_t *total, const char *fn)
{
    uint64_t sums[2] = {0, 0};
    int rc = progcache__redis_scan(s, "", measure_batch, sums, fn);
    *count = sums[0];
    *total = sums[1];
    return rc;
}

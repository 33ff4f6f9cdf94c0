/* progcache remote: check the remote tier as a program would use it. */
#include <stdlib.h>
#include <string.h>

#include "progcache/remote.h"
#include "progcache/sys/store.h"
#include "tool.h"

#define CMD "remote"

static const char usage_text[] =
    "usage: progcache remote [--url URL] [--secret-file FILE] [--prefix PREFIX]\n"
    "                        [--lease KEYHEX] [--pings N] [--json]\n"
    "\n"
    "Check the remote tier (Redis; for HTTP and S3, its listing and what it holds)\n"
    "with the configuration a program would use:\n"
    "$PROGCACHE_REMOTE and $PROGCACHE_REMOTE_SECRET_FILE, or the options below.\n"
    "Shows whether the server is reachable (connected, authenticated, answering),\n"
    "the round-trip latency, whether the connection and the entries are\n"
    "authenticated, the entries and bytes held under the key prefix, the\n"
    "single-flight leases held now (which machine compiles which key), and the\n"
    "server's memory policy (a warning unless it is allkeys-lru or another\n"
    "allkeys-* policy: docs/REMOTE.md).\n"
    "\n"
    "options:\n"
    "  --url URL          the server (default: $PROGCACHE_REMOTE)\n"
    "  --secret-file FILE the shared secret (default: $PROGCACHE_REMOTE_SECRET_FILE\n"
    "                     when the URL comes from $PROGCACHE_REMOTE; none with --url)\n"
    "  --prefix PREFIX    the key prefix (default: progcache:, as programs use)\n"
    "  --lease KEYHEX     show the lease of this key only (KEYHEX as 'progcache key'\n"
    "                     prints it): who holds it and for how long still\n"
    "  --pings N          PINGs for the latency (default 5, at most 1000)\n"
    "  --json             print one JSON object instead of text\n"
    "  -h, --help         this text\n"
    "\n"
    "Exit status: 0 the tier is usable; 1 it is not (not configured, unreachable,\n"
    "AUTH refused, a URL or secret file that cannot be used, a build without\n"
    "hiredis); 2 bad usage.\n";

typedef struct args {
    const char *url, *secret_file, *prefix, *lease;
    unsigned int pings;
    int json;
} args;

/* -1: go on; else the exit code (--help printed, or a usage error). */
static int parse(args *a, int argc, char **argv)
{
    enum { OPT_URL = 256, OPT_SECRET_FILE, OPT_PREFIX, OPT_LEASE, OPT_PINGS };
    static const tool_option options[] = {
        {"url", OPT_URL, 1},       {"secret-file", OPT_SECRET_FILE, 1}, {"prefix", OPT_PREFIX, 1},
        {"lease", OPT_LEASE, 1},   {"pings", OPT_PINGS, 1},             {NULL, 0, 0}};
    memset(a, 0, sizeof *a);
    tool_parser p;
    tool_parser_init(&p, CMD, usage_text, argc, argv, options, TOOL_JSON);
    for (int c; (c = tool_next(&p)) != TOOL_END;) {
        const char **dest = NULL, *flag = NULL;
        switch (c) {
        case TOOL_EXIT:
            return p.code;
        case OPT_URL:
            dest = &a->url, flag = "--url";
            break;
        case OPT_SECRET_FILE:
            dest = &a->secret_file, flag = "--secret-file";
            break;
        case OPT_PREFIX:
            dest = &a->prefix, flag = "--prefix";
            break;
        case OPT_LEASE:
            dest = &a->lease, flag = "--lease";
            break;
        case OPT_PINGS: {
            char *end;
            unsigned long n = strtoul(p.arg, &end, 10);
            if (!*p.arg || *end || n == 0 || n > 1000)
                return tool_usage_error(CMD, "--pings \"%s\": give a number from 1 to 1000",
                                        p.arg);
            a->pings = (unsigned int)n;
            continue;
        }
        default: /* a positional argument: remote takes none */
            return tool_unexpected_arg(CMD, p.arg);
        }
        if (!*p.arg)
            return tool_usage_error(CMD, "%s is empty", flag);
        *dest = p.arg;
    }
    a->json = p.json;
    return -1;
}

int tool_remote_open(const char *cmd, const char *url_arg, const char *secret_file,
                     const char *prefix, progcache_store **out, const char **source)
{
    progcache_buf url = PROGCACHE_BUF_INIT, secret = PROGCACHE_BUF_INIT;
    int code = EXIT_OK;
    *source = "--url";
    if (!url_arg) {
        *source = "$PROGCACHE_REMOTE";
        int rc = progcache_default_remote(&url, &secret);
        if (rc == PROGCACHE_ENOTFOUND) {
            tool_error(cmd, "no remote tier is configured: set PROGCACHE_REMOTE (and "
                            "PROGCACHE_REMOTE_SECRET_FILE), or pass --url");
            code = EXIT_NO; /* the answer: not usable */
            goto done;
        }
        if (rc) {
            code = tool_lib_error(cmd, EXIT_NO, "the remote tier cannot be used");
            goto done;
        }
    }
    if (secret_file && progcache_remote_secret_read(&secret, secret_file)) {
        code = tool_lib_error(cmd, EXIT_NO, "the remote tier cannot be used");
        goto done;
    }
    progcache_redis_options ro = PROGCACHE_REDIS_OPTIONS_INIT;
    ro.url = url_arg ? url_arg : (const char *)url.data;
    ro.key_prefix = prefix;
    ro.secret = secret.size ? secret.data : NULL;
    ro.secret_len = secret.size;
    /* Nothing is written, so nothing is queued. */
    ro.flags = PROGCACHE_REDIS_SYNC_PUT;
    if (progcache_store_redis_new(out, &ro) != PROGCACHE_OK)
        code = tool_lib_error(cmd, EXIT_NO, "the remote tier cannot be used");
done:
    if (secret.data)
        memset(secret.data, 0, secret.capacity);
    progcache_buf_free(&secret);
    progcache_buf_free(&url);
    return code;
}

/* ---- leases ---------------------------------------------------------------- */

typedef struct lease_list {
    int json;
    size_t n;
} lease_list;

static void print_lease(void *ctx, const char *hash, const char *key16,
                        const progcache_store_lease_info *info)
{
    lease_list *l = ctx;
    if (l->json) {
        printf("%s{\"hash\": \"%s\", \"key16\": ", l->n ? ", " : "", hash);
        tool_json_string(stdout, key16);
        printf(", \"holder\": ");
        tool_json_string(stdout, info->holder);
        printf(", \"ttl_ms\": %lld}", (long long)info->ttl_ms);
    } else {
        printf("  key %s... held by %s, %.1f s left (lease %.16s...)\n",
               key16[0] ? key16 : "????????????????", info->holder[0] ? info->holder : "?",
               (double)info->ttl_ms / 1000.0, hash);
    }
    l->n++;
}

/* --lease KEYHEX: that key's lease. EXIT_OK or an exit code. */
static int show_one_lease(const args *a, progcache_store *store)
{
    size_t len;
    unsigned char *key;
    int code = tool_key_arg(CMD, a->lease, &key, &len);
    if (code)
        return code;
    progcache_store_lease_info info = PROGCACHE_STORE_LEASE_INFO_INIT;
    int rc = progcache_store_lease_holder(&info, store, key, len);
    free(key);
    if (rc != PROGCACHE_OK && rc != PROGCACHE_ENOTFOUND)
        return tool_lib_error(CMD, EXIT_NO, "cannot read the lease");
    if (a->json) {
        printf(", \"lease\": {\"key\": ");
        tool_json_string(stdout, a->lease);
        printf(", \"held\": %s", rc ? "false" : "true");
        if (!rc) {
            printf(", \"holder\": ");
            tool_json_string(stdout, info.holder);
            printf(", \"ttl_ms\": %lld", (long long)info.ttl_ms);
        }
        printf("}");
    } else if (rc) {
        printf("%-18s not held (nobody is compiling key %.16s...)\n", "lease", a->lease);
    } else {
        printf("%-18s key %.16s... held by %s, %.1f s left\n", "lease", a->lease,
               info.holder[0] ? info.holder : "a holder that gives no name",
               (double)info.ttl_ms / 1000.0);
    }
    return EXIT_OK;
}

/* ---- the report -------------------------------------------------------------- */

static void print_text(const progcache_redis_status *st, const char *source)
{
    char a[64], b[64];
    printf("%-18s %s (from %s)\n", "remote tier", st->where, source);
    if (!st->reachable) {
        printf("%-18s no: %s\n", "reachable", st->error);
        return;
    }
    printf("%-18s yes\n", "reachable");
    printf("%-18s %.3f ms (median of %u PINGs; %.3f to %.3f)\n", "latency",
           st->ping_median_ms, st->pings, st->ping_min_ms, st->ping_max_ms);
    if (st->auth)
        printf("%-18s on (AUTH as %s)\n", "server auth", st->user[0] ? st->user : "the default user");
    else
        printf("%-18s off (no password in the URL)\n", "server auth");
    printf("%-18s %s\n", "entry secret",
           st->secret ? "on (values carry an HMAC-SHA256 tag, checked on every read)"
                      : "off (values are not authenticated: docs/SECURITY.md)");
    printf("%-18s %s\n", "key prefix", st->prefix);
    tool_format_size_long(a, sizeof a, st->bytes);
    printf("%-18s %llu (%s of artifacts)\n", "entries", (unsigned long long)st->entries, a);
    if (st->server_version[0])
        printf("%-18s redis %s\n", "server", st->server_version);
    else
        printf("%-18s %s\n", "server", "? (the server refused INFO)");
    if (st->maxmemory_policy[0]) {
        tool_format_size_long(a, sizeof a, st->used_memory);
        tool_format_size_long(b, sizeof b, st->maxmemory);
        printf("%-18s %s used, cap %s, maxmemory-policy %s\n", "memory", a,
               st->maxmemory ? b : "none (maxmemory 0)", st->maxmemory_policy);
    }
}

static void print_json(const progcache_redis_status *st, const char *source)
{
    printf(", \"where\": ");
    tool_json_string(stdout, st->where);
    printf(", \"source\": ");
    tool_json_string(stdout, source);
    printf(", \"reachable\": %s", st->reachable ? "true" : "false");
    if (!st->reachable) {
        printf(", \"error\": ");
        tool_json_string(stdout, st->error);
        return;
    }
    printf(", \"ping_median_ms\": %.3f, \"ping_min_ms\": %.3f, \"ping_max_ms\": %.3f, "
           "\"pings\": %u",
           st->ping_median_ms, st->ping_min_ms, st->ping_max_ms, st->pings);
    printf(", \"auth\": %s, \"user\": ", st->auth ? "true" : "false");
    tool_json_string(stdout, st->user);
    printf(", \"secret\": %s, \"prefix\": ", st->secret ? "true" : "false");
    tool_json_string(stdout, st->prefix);
    printf(", \"entries\": %llu, \"bytes\": %llu, \"leases\": %llu",
           (unsigned long long)st->entries, (unsigned long long)st->bytes,
           (unsigned long long)st->leases);
    printf(", \"server_version\": ");
    tool_json_string(stdout, st->server_version);
    printf(", \"maxmemory\": %llu, \"used_memory\": %llu, \"maxmemory_policy\": ",
           (unsigned long long)st->maxmemory, (unsigned long long)st->used_memory);
    tool_json_string(stdout, st->maxmemory_policy);
    printf(", \"policy_ok\": %s", st->policy_ok ? "true" : "false");
}

/* The server evicts what a cache needs it to? A warning when not. */
static void warn_policy(const progcache_redis_status *st)
{
    if (!st->reachable || !st->maxmemory_policy[0])
        return;
    if (!st->maxmemory)
        fprintf(stderr,
                "progcache %s: warning: the server has no memory cap (maxmemory 0): it grows "
                "with every artifact until the machine runs out; set maxmemory and "
                "maxmemory-policy allkeys-lru (docs/REMOTE.md, \"Sizing the server\")\n",
                CMD);
    if (st->policy_ok)
        return;
    fprintf(stderr,
            "progcache %s: warning: the server's maxmemory-policy is %s: %s; set "
            "maxmemory-policy allkeys-lru (docs/REMOTE.md, \"Sizing the server\")\n",
            CMD, st->maxmemory_policy,
            !strcmp(st->maxmemory_policy, "noeviction")
                ? "when full it refuses every write, and nodes stop sharing what they compile"
                : "it evicts only keys with an expiry, which progcache's entries have only "
                  "with ttl_seconds set; when full it refuses the rest");
}

/* An HTTP or S3 tier (docs/REMOTE.md, "HTTP and S3"): reachable, and its
 * credentials accepted, when its listing answers; what it holds. */
static int is_http_url(const char *url)
{
    return url && (!strncmp(url, "http://", 7) || !strncmp(url, "https://", 8) ||
                   !strncmp(url, "s3://", 5));
}

static int check_http(const args *a, const char *url, const char *source)
{
    progcache_store *store = NULL;
    if (progcache_store_open_url(&store, url, NULL) != PROGCACHE_OK)
        return tool_lib_error(CMD, EXIT_NO, "the remote tier cannot be used");
    uint64_t n = 0, bytes = 0;
    int rc = progcache_store_count(&n, store);
    if (rc == PROGCACHE_OK)
        rc = progcache_store_total_size(&bytes, store);
    int where = (int)strcspn(url, "?");
    if (a->json) {
        tool_json_begin(stdout);
        printf(", \"where\": \"%.*s\", \"source\": ", where, url);
        tool_json_string(stdout, source);
        printf(", \"reachable\": %s", rc ? "false" : "true");
        if (rc) {
            printf(", \"error\": ");
            tool_json_string(stdout, progcache_error_last());
        } else {
            printf(", \"entries\": %llu, \"bytes\": %llu", (unsigned long long)n,
                   (unsigned long long)bytes);
        }
        printf(", \"usable\": %s}\n", rc ? "false" : "true");
    } else {
        printf("%-18s %.*s (from %s)\n", "remote tier", where, url, source);
        if (rc)
            printf("%-18s no: %s\n", "reachable", progcache_error_last());
        else
            printf("%-18s yes (listed)\n%-18s %llu (%llu bytes of payload)\n", "reachable",
                   "entries", (unsigned long long)n, (unsigned long long)bytes);
        printf("%-18s %s\n", "status", rc ? "UNUSABLE" : "usable");
    }
    fflush(stdout);
    progcache_store_free(store);
    if (rc)
        return tool_lib_error(CMD, EXIT_NO, "the remote tier is not usable");
    return EXIT_OK;
}

/* A Redis tier: url (NULL: $PROGCACHE_REMOTE's one URL). */
static int check_redis(const args *a, const char *url)
{
    progcache_store *store = NULL;
    const char *source;
    int code = tool_remote_open(CMD, url, a->secret_file, a->prefix, &store, &source);
    if (code)
        return code;
    progcache_redis_status st = PROGCACHE_REDIS_STATUS_INIT;
    int rc = progcache_redis_status_get(&st, store, a->pings);
    if (a->json)
        tool_json_begin(stdout);
    if (a->json)
        print_json(&st, source);
    else
        print_text(&st, source);
    int usable = rc == PROGCACHE_OK;
    if (st.reachable && !st.error[0]) {
        if (a->lease) {
            code = show_one_lease(a, store);
        } else {
            lease_list l = {a->json, 0};
            if (a->json)
                printf(", \"held\": [");
            else
                printf("%-18s %llu\n", "leases held now", (unsigned long long)st.leases);
            if (progcache_redis_leases(store, print_lease, &l) != PROGCACHE_OK) {
                usable = 0;
                code = tool_lib_error(CMD, EXIT_NO, "cannot list the leases");
            }
            if (a->json)
                printf("]");
        }
    }
    if (a->json)
        printf(", \"usable\": %s}\n", usable && !code ? "true" : "false");
    else
        printf("%-18s %s\n", "status", usable && !code ? "usable" : "UNUSABLE");
    fflush(stdout);
    if (!usable && !code) {
        tool_error(CMD, "the remote tier is not usable: Redis %s: %s", st.where,
                   st.error[0] ? st.error : progcache_error_last());
        code = EXIT_NO; /* the answer: not usable */
    }
    warn_policy(&st);
    progcache_store_free(store);
    return code;
}

/* One tier of a list, by its scheme. */
static int check_one(const args *a, const char *url, const char *source)
{
    return is_http_url(url) ? check_http(a, url, source) : check_redis(a, url);
}

/* A stacked list (docs/REMOTE.md, "Stacked tiers"): each tier in order,
 * each said whole (its JSON a line of its own); the first tier that is
 * not usable decides the exit status. */
static int check_list(const args *a, char *list, const char *source)
{
    int code = EXIT_OK, i = 0;
    for (char *p = list; *(p += strspn(p, " \t"));) {
        char *end = p + strcspn(p, " \t"), save = *end;
        *end = 0;
        if (!a->json)
            printf("%stier %d\n", i ? "\n" : "", i + 1);
        int c = check_one(a, p, source);
        if (c && !code)
            code = c;
        *end = save;
        p = end;
        i++;
    }
    return code;
}

int cmd_remote(int argc, char **argv)
{
    args a;
    int code = parse(&a, argc, argv);
    if (code >= 0)
        return code;
    progcache_buf list = PROGCACHE_BUF_INIT, env_secret = PROGCACHE_BUF_INIT;
    const char *source = a.url ? "--url" : "$PROGCACHE_REMOTE";
    if (!a.url && progcache_default_remote(&list, &env_secret) == PROGCACHE_OK)
        ;
    else if (a.url && progcache_buf_set(&list, a.url, strlen(a.url) + 1) != PROGCACHE_OK)
        return tool_lib_error(CMD, EXIT_FAILED, "out of memory");
    if (env_secret.data)
        memset(env_secret.data, 0, env_secret.capacity);
    progcache_buf_free(&env_secret);
    char *text = (char *)list.data;
    size_t n = 0;
    for (const char *p = text; p && *(p += strspn(p, " \t")); p += strcspn(p, " \t"))
        n++;
    if (n > 1)
        code = check_list(&a, text, source);
    else if (n == 1 && is_http_url(text + strspn(text, " \t")))
        code = check_http(&a, text + strspn(text, " \t"), source);
    else
        code = check_redis(&a, a.url); /* one Redis URL, or none: said there */
    progcache_buf_free(&list);
    return code;
}

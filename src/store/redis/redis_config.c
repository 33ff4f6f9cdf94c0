/* The Redis store's options: URL parsing, defaults, the secret. No hiredis
 * here, so this builds (and its tests run) everywhere. */
#include "store/redis/redis_config.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/un.h>

#include "alloc.h"
#include "error.h"
#include "options.h"
#include "sha256.h" /* progcache__hex_digit */
#include "url_mask.h"

#define DEFAULT_TIMEOUT_MS 100u
#define DEFAULT_FAILURES 3u
#define DEFAULT_BACKOFF_MS 5000u
#define DEFAULT_QUEUE_BYTES (UINT64_C(64) << 20)

/* The longest path a struct sockaddr_un holds (sizeof sun_path - 1). */
#define SOCKET_PATH_MAX (sizeof(((struct sockaddr_un *)0)->sun_path) - 1)

#define KNOWN_FLAGS (PROGCACHE_REDIS_READONLY | PROGCACHE_REDIS_SYNC_PUT)

#define URL_FORMS                                                              \
    "use redis://[[USER]:PASSWORD@]HOST[:PORT][/DB] or "                       \
    "unix:/path/to/socket[?db=N&user=U&password=P]"

void progcache_redis_options_init(progcache_redis_options *opts)
{
    progcache__struct_init(opts, sizeof *opts, PROGCACHE_REDIS_OPTIONS_VERSION);
}

/* ---- the URL ----------------------------------------------------------- */

/* Messages quote the URL's masked form (url_mask.h), made once before
 * parsing: the parser's messages are built from a string that never held
 * the password, whatever the URL's shape. */
static int url_error(const char *shown, const char *why)
{
    return progcache__error(PROGCACHE_EINVAL, "Redis URL \"%s\": %s; %s", shown, why, URL_FORMS);
}

/* Percent-decode s[0..len) into a new string; -1 on a malformed escape
 * or an encoded NUL, -2 when out of memory. */
static int decode(char **out, const char *s, size_t len)
{
    char *d = progcache__malloc(len + 1);
    if (!d)
        return -2;
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] != '%') {
            d[n++] = s[i];
            continue;
        }
        int hi = i + 1 < len ? progcache__hex_digit(s[i + 1]) : -1;
        int lo = i + 2 < len ? progcache__hex_digit(s[i + 2]) : -1;
        if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
            progcache__free(d);
            return -1;
        }
        d[n++] = (char)(hi << 4 | lo);
        i += 2;
    }
    d[n] = '\0';
    *out = d;
    return 0;
}

/* Decimal digits only, at most max. */
static int parse_uint(unsigned long *out, const char *s, size_t len, unsigned long max)
{
    unsigned long v = 0;
    if (len == 0 || len > 10)
        return -1;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (unsigned long)(s[i] - '0');
    }
    if (v > max)
        return -1;
    *out = v;
    return 0;
}

static int decode_field(char **out, const char *shown, const char *s, size_t len,
                        const char *what)
{
    int r = decode(out, s, len);
    if (r == -2)
        return progcache__error(PROGCACHE_ENOMEM, "out of memory parsing a Redis URL");
    if (r == -1) {
        char why[96];
        snprintf(why, sizeof why, "the %s has a malformed %%-escape", what);
        return url_error(shown, why);
    }
    return PROGCACHE_OK;
}

static int parse_host_port(progcache__redis_url *u, const char *shown, const char *s,
                           size_t len)
{
    const char *host = s, *port = NULL;
    size_t host_len = len, port_len = 0;
    if (len && s[0] == '[') {
        const char *close = memchr(s, ']', len);
        if (!close)
            return url_error(shown, "an IPv6 address misses its closing ']'");
        host = s + 1;
        host_len = (size_t)(close - host);
        const char *rest = close + 1;
        size_t rest_len = len - (size_t)(rest - s);
        if (rest_len && rest[0] != ':')
            return url_error(shown, "unexpected text after the IPv6 address");
        if (rest_len) {
            port = rest + 1;
            port_len = rest_len - 1;
        }
    } else {
        const char *colon = memchr(s, ':', len);
        if (colon) {
            if (memchr(colon + 1, ':', len - (size_t)(colon + 1 - s)))
                return url_error(shown, "write an IPv6 address in brackets, like [::1]:6379");
            host_len = (size_t)(colon - s);
            port = colon + 1;
            port_len = len - host_len - 1;
        }
    }
    if (host_len == 0)
        return url_error(shown, "the host is empty");
    unsigned long p = PROGCACHE__REDIS_DEFAULT_PORT;
    if (port && (parse_uint(&p, port, port_len, 65535) || p == 0))
        return url_error(shown, "the port is not a number from 1 to 65535");
    u->port = (int)p;
    return decode_field(&u->host, shown, host, host_len, "host");
}

static int parse_userinfo(progcache__redis_url *u, const char *shown, const char *s,
                          size_t len)
{
    const char *colon = memchr(s, ':', len);
    if (!colon)
        return url_error(shown, "the part before '@' has no ':'; write :PASSWORD@ for a "
                                "password alone, or USER:PASSWORD@");
    size_t user_len = (size_t)(colon - s);
    int rc = PROGCACHE_OK;
    if (user_len)
        rc = decode_field(&u->user, shown, s, user_len, "user name");
    if (!rc)
        rc = decode_field(&u->password, shown, colon + 1, len - user_len - 1, "password");
    return rc;
}

static int parse_tcp(progcache__redis_url *u, const char *url, const char *shown)
{
    const char *s = url + strlen("redis://");
    /* The credentials end at the last '@' of the URL: a password may hold
     * '@', '/', '?' or '#' (nothing after the host can hold an '@'). */
    const char *at = strrchr(s, '@');
    int rc;
    if (at && (rc = parse_userinfo(u, shown, s, (size_t)(at - s))))
        return rc;
    const char *hp = at ? at + 1 : s;
    size_t hp_len = strcspn(hp, "/?#");
    if ((rc = parse_host_port(u, shown, hp, hp_len)))
        return rc;
    const char *rest = hp + hp_len;
    if (*rest == '/') {
        rest++;
        size_t db_len = strcspn(rest, "?#");
        unsigned long db = 0;
        if (db_len && parse_uint(&db, rest, db_len, 1000000))
            return url_error(shown, "the path must be a database number, like /0");
        u->db = (unsigned int)db;
        rest += db_len;
    }
    if (*rest)
        return url_error(shown, "redis:// URLs take no query or fragment; give the database "
                                "as the path (/N)");
    return PROGCACHE_OK;
}

/* The query items a unix: URL takes, each at most once. */
enum { ITEM_DB = 1, ITEM_USER = 2, ITEM_PASSWORD = 4 };

static int parse_query_item(progcache__redis_url *u, const char *shown, const char *s,
                            size_t len, unsigned int *given)
{
    const char *eq = memchr(s, '=', len);
    if (!eq)
        return url_error(shown, "a query item has no '='");
    size_t name_len = (size_t)(eq - s);
    const char *val = eq + 1;
    size_t val_len = len - name_len - 1;
    unsigned int item = name_len == 2 && !memcmp(s, "db", 2)         ? ITEM_DB
                        : name_len == 4 && !memcmp(s, "user", 4)     ? ITEM_USER
                        : name_len == 8 && !memcmp(s, "password", 8) ? ITEM_PASSWORD
                                                                     : 0;
    if (!item)
        return url_error(shown, "unknown query item (known: db, user, password)");
    /* Twice is an error, not "the last wins": which one a reader takes for
     * the password must not be a guess (nor the message's value shown). */
    if (*given & item)
        return url_error(shown, item == ITEM_DB     ? "db= is given twice"
                                : item == ITEM_USER ? "user= is given twice"
                                                    : "password= is given twice");
    *given |= item;
    if (item == ITEM_DB) {
        unsigned long db;
        if (parse_uint(&db, val, val_len, 1000000))
            return url_error(shown, "db= must be a database number");
        u->db = (unsigned int)db;
        return PROGCACHE_OK;
    }
    char **field = item == ITEM_USER ? &u->user : &u->password;
    return decode_field(field, shown, val, val_len, item == ITEM_USER ? "user name" : "password");
}

static int parse_unix(progcache__redis_url *u, const char *url, const char *shown)
{
    const char *s = url + strlen("unix:");
    if (strncmp(s, "//", 2) == 0)
        s += 2;
    size_t path_len = strcspn(s, "?#");
    if (path_len == 0 || s[0] != '/')
        return url_error(shown, "the socket path must be absolute");
    int rc = decode_field(&u->path, shown, s, path_len, "socket path");
    /* hiredis copies the path into sun_path and cuts what does not fit:
     * it would connect to whatever listens at the cut path. */
    if (!rc && strlen(u->path) > SOCKET_PATH_MAX) {
        char why[192];
        snprintf(why, sizeof why,
                 "the socket path is %zu bytes; a Unix socket's path holds at most %zu "
                 "(sun_path less its NUL): use a shorter path to the socket",
                 strlen(u->path), (size_t)SOCKET_PATH_MAX);
        return url_error(shown, why);
    }
    const char *q = s + path_len;
    if (!rc && *q == '#')
        return url_error(shown, "unix: URLs take no fragment");
    unsigned int given = 0;
    if (!rc && *q == '?') {
        q++;
        while (!rc && *q) {
            size_t item = strcspn(q, "&");
            rc = parse_query_item(u, shown, q, item, &given);
            q += item;
            if (*q == '&')
                q++;
        }
    }
    return rc;
}

int progcache__redis_url_parse(progcache__redis_url *out, const char *url)
{
    memset(out, 0, sizeof *out);
    if (!url || !*url)
        return progcache__error(PROGCACHE_EINVAL,
                                "the Redis URL is empty; " URL_FORMS " (docs/REMOTE.md)");
    char *shown = progcache__url_masked(url);
    if (!shown)
        return progcache__error(PROGCACHE_ENOMEM, "out of memory parsing a Redis URL");
    int rc;
    if (strncmp(url, "rediss://", 9) == 0)
        rc = url_error(shown, "TLS (rediss://) is not supported: progcache talks to Redis "
                              "through hiredis without its TLS support; run a local TLS "
                              "tunnel (stunnel or socat, docs/REMOTE.md \"TLS\") and point "
                              "progcache at its local end, redis://127.0.0.1:PORT");
    else if (strncmp(url, "redis://", 8) == 0)
        rc = parse_tcp(out, url, shown);
    else if (strncmp(url, "unix:", 5) == 0)
        rc = parse_unix(out, url, shown);
    else
        rc = url_error(shown, "unknown scheme");
    progcache__free(shown);
    if (rc)
        progcache__redis_url_release(out);
    return rc;
}

void progcache__redis_url_release(progcache__redis_url *u)
{
    if (!u)
        return;
    progcache__free(u->host);
    progcache__free(u->path);
    progcache__free(u->user);
    if (u->password) {
        /* volatile: the wipe must not be optimised away before the free. */
        volatile char *p = u->password;
        while (*p)
            *p++ = 0;
    }
    progcache__free(u->password);
    memset(u, 0, sizeof *u);
}

void progcache__redis_url_describe(char *out, size_t size, const progcache__redis_url *u)
{
    const char *user = u->user ? u->user : "";
    const char *cred = u->password ? ":***@" : (u->user ? "@" : "");
    if (u->path)
        snprintf(out, size, "unix:%s?db=%u%s%s", u->path, u->db, u->user ? "&user=" : "",
                 user);
    else if (strchr(u->host, ':'))
        snprintf(out, size, "redis://%s%s[%s]:%d/%u", user, cred, u->host, u->port, u->db);
    else
        snprintf(out, size, "redis://%s%s%s:%d/%u", user, cred, u->host, u->port, u->db);
}

void progcache_url_mask(char *out, size_t size, const char *url)
{
    if (out && size)
        progcache__url_mask(out, size, url ? url : "");
}

/* ---- the options ------------------------------------------------------- */

/* The struct's size in each version, for progcache__options_load. */
static const size_t options_size[] = {0, offsetof(progcache_redis_options, max_artifact_size),
                                      offsetof(progcache_redis_options, min_rate),
                                      sizeof(progcache_redis_options)};

/* Load the caller's options into o (defaults for what an older caller's
 * struct lacks). */
static int load_options(progcache_redis_options *o, const progcache_redis_options *opts)
{
    if (!opts)
        return progcache__error(PROGCACHE_EINVAL,
                                "progcache_store_redis_new: opts is NULL; the Redis store needs "
                                "options with at least a url");
    progcache_redis_options_init(o);
    return progcache__options_load(o, opts, options_size, PROGCACHE_REDIS_OPTIONS_VERSION,
                                  "progcache_store_redis_new", "progcache_redis_options");
}

static int check_fields(const progcache_redis_options *opts)
{
    if (opts->flags & ~KNOWN_FLAGS)
        return progcache__error(PROGCACHE_EINVAL,
                                "progcache_store_redis_new: opts->flags has unknown bits 0x%x",
                                opts->flags & ~KNOWN_FLAGS);
    if (opts->key_prefix && strlen(opts->key_prefix) > PROGCACHE__REDIS_MAX_PREFIX)
        return progcache__error(PROGCACHE_EINVAL,
                                "progcache_store_redis_new: opts->key_prefix is %zu bytes; use "
                                "at most %d",
                                strlen(opts->key_prefix), PROGCACHE__REDIS_MAX_PREFIX);
    if (!opts->secret && opts->secret_len)
        return progcache__error(PROGCACHE_EINVAL,
                                "progcache_store_redis_new: opts->secret is NULL but "
                                "secret_len is %zu",
                                opts->secret_len);
    if (opts->secret && !opts->secret_len)
        return progcache__error(PROGCACHE_EINVAL,
                                "progcache_store_redis_new: opts->secret is set but secret_len "
                                "is 0; pass its length, or NULL for no secret");
    return PROGCACHE_OK;
}

int progcache__redis_config_init(progcache__redis_config *out,
                                 const progcache_redis_options *opts)
{
    memset(out, 0, sizeof *out);
    progcache_redis_options o;
    int rc = load_options(&o, opts);
    if (rc)
        return rc;
    opts = &o;
    rc = check_fields(opts);
    if (!rc)
        rc = progcache__redis_url_parse(&out->url, opts->url);
    if (!rc && opts->secret) {
        rc = progcache__envelope_key_new(&out->hmac, opts->secret, opts->secret_len);
        if (rc)
            progcache__error_prefix("progcache_store_redis_new: opts->secret");
    }
    if (rc) {
        progcache__redis_config_release(out);
        return rc;
    }
    progcache__redis_url_describe(out->where, sizeof out->where, &out->url);
    const char *prefix = opts->key_prefix && *opts->key_prefix ? opts->key_prefix
                                                               : PROGCACHE__REDIS_DEFAULT_PREFIX;
    out->prefix_len = strlen(prefix);
    memcpy(out->prefix, prefix, out->prefix_len + 1);
    out->connect_timeout_ms = opts->connect_timeout_ms ? opts->connect_timeout_ms
                                                       : DEFAULT_TIMEOUT_MS;
    out->command_timeout_ms = opts->command_timeout_ms ? opts->command_timeout_ms
                                                       : DEFAULT_TIMEOUT_MS;
    out->ttl_seconds = opts->ttl_seconds;
    out->flags = opts->flags;
    out->failures_before_backoff = opts->failures_before_backoff ? opts->failures_before_backoff
                                                                 : DEFAULT_FAILURES;
    out->backoff_ms = opts->backoff_ms ? opts->backoff_ms : DEFAULT_BACKOFF_MS;
    out->max_queue_bytes = opts->max_queue_bytes ? opts->max_queue_bytes : DEFAULT_QUEUE_BYTES;
    out->max_artifact_size =
        opts->max_artifact_size ? opts->max_artifact_size : PROGCACHE_MAX_ARTIFACT_SIZE_DEFAULT;
    out->min_rate = opts->min_rate ? opts->min_rate : PROGCACHE_REDIS_MIN_RATE_DEFAULT;
    out->log = opts->log;
    out->log_ctx = opts->log_ctx;
    return PROGCACHE_OK;
}

void progcache__redis_config_release(progcache__redis_config *cfg)
{
    if (!cfg)
        return;
    progcache__redis_url_release(&cfg->url);
    progcache__envelope_key_free(cfg->hmac);
    cfg->hmac = NULL;
}

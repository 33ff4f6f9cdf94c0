/* The HTTP/S3 tier's configuration (http_config.h): the URL's parts, its
 * query parameters, and the credentials from the files and variables the
 * operator names (docs/REMOTE.md, "HTTP and S3"). Credentials never come
 * from the URL: a URL is shown in messages, `progcache config` and logs,
 * so one holding a password is refused rather than masked and kept. */
#include "store/http/http_config.h"
#include "store/http/http.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "config.h"
#include "error.h"
#include "fs.h"
#include "remote/remote_file.h"

#define DEFAULT_TIMEOUT_MS 2000u
#define MAX_TIMEOUT_MS 600000u
#define MAX_URL 2048
#define MAX_CRED_FILE 8192 /* a credentials file larger than this is refused */
#define MAX_CA_FILE (4u << 20) /* a CA bundle: the system's is about 200 KiB */
#define AUTH_VAR "PROGCACHE_REMOTE_AUTH_FILE"

int progcache__http_scheme(const char *scheme, size_t len)
{
    return (len == 4 && memcmp(scheme, "http", 4) == 0) ||
           (len == 5 && memcmp(scheme, "https", 5) == 0) ||
           (len == 2 && memcmp(scheme, "s3", 2) == 0);
}

static char *dup_n(const char *s, size_t n)
{
    char *d = progcache__malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

static char *join3(const char *a, const char *b, const char *c)
{
    size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
    char *d = progcache__malloc(la + lb + lc + 1);
    if (d) {
        memcpy(d, a, la);
        memcpy(d + la, b, lb);
        memcpy(d + la + lb, c, lc + 1);
    }
    return d;
}

static void wipe_free(char *s)
{
    if (s) {
        memset(s, 0, strlen(s));
        progcache__free(s);
    }
}

void progcache__http_config_release(progcache__http_config *c)
{
    if (!c)
        return;
    progcache__free(c->base);
    progcache__free(c->where);
    progcache__free(c->ca_file);
    progcache_buf_free(&c->ca);
    progcache__free(c->sigv4);
    progcache__free(c->root);
    progcache__free(c->prefix);
    wipe_free(c->userpwd);
    wipe_free(c->bearer);
    wipe_free(c->token_header);
    memset(c, 0, sizeof *c);
}

/* The value of query parameter name in q ("a=1&b=2"), copied, or NULL. */
static int query_value(char **out, const char *q, const char *name)
{
    size_t nl = strlen(name);
    *out = NULL;
    while (q && *q) {
        const char *end = strchr(q, '&');
        size_t len = end ? (size_t)(end - q) : strlen(q);
        if (len > nl && q[nl] == '=' && memcmp(q, name, nl) == 0) {
            if (!(*out = dup_n(q + nl + 1, len - nl - 1)))
                return PROGCACHE_ENOMEM;
            return PROGCACHE_OK;
        }
        q = end ? end + 1 : NULL;
    }
    return PROGCACHE_OK;
}

/* Refuse query parameters the tier does not know: a typo must not be a
 * silently ignored setting. */
static int query_check(const char *q, const char *where, int s3)
{
    while (q && *q) {
        const char *end = strchr(q, '&');
        size_t len = end ? (size_t)(end - q) : strlen(q);
        const char *eq = memchr(q, '=', len);
        size_t nl = eq ? (size_t)(eq - q) : len;
        int known = (nl == 10 && !memcmp(q, "timeout_ms", 10)) ||
                    (s3 && nl == 8 && !memcmp(q, "endpoint", 8)) ||
                    (s3 && nl == 6 && !memcmp(q, "region", 6));
        if (!known)
            return progcache__error(PROGCACHE_EINVAL,
                                    "the remote tier %s: unknown parameter \"%.*s\" (this tier "
                                    "takes timeout_ms%s)",
                                    where, (int)(nl > 40 ? 40 : nl), q,
                                    s3 ? ", endpoint and region" : "");
        q = end ? end + 1 : NULL;
    }
    return PROGCACHE_OK;
}

/* A whole credentials file, bounded, private (remote_file.h), its last
 * newline dropped. The message names the file and the variable, never its
 * bytes. */
static int read_small(char **out, const char *path, const char *label)
{
    *out = NULL;
    progcache_buf b = PROGCACHE_BUF_INIT;
    int rc = progcache__remote_file_read(&b, path, label, MAX_CRED_FILE,
                                         PROGCACHE__REMOTE_FILE_PRIVATE);
    if (!rc)
        rc = progcache__buf_reserve(&b, b.size + 1);
    if (rc) {
        progcache_buf_free(&b);
        return rc;
    }
    size_t n = b.size;
    char *buf = (char *)b.data;
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        n--;
    buf[n] = 0;
    *out = buf; /* the buffer's bytes are the caller's now (wipe_free) */
    return PROGCACHE_OK;
}

/* PROGCACHE_REMOTE_AUTH_FILE: "Bearer TOKEN" or "user:password" on its
 * first line. */
static int http_credentials(progcache__http_config *c)
{
    const char *path = progcache__config_env(AUTH_VAR);
    char *text = NULL;
    if (!path)
        return PROGCACHE_OK;
    int rc = read_small(&text, path, AUTH_VAR);
    if (rc)
        return rc;
    text[strcspn(text, "\r\n")] = 0;
    if (strncmp(text, "Bearer ", 7) == 0 && text[7]) {
        c->bearer = progcache__strdup(text + 7);
    } else if (strchr(text, ':') && text[0] != ':') {
        c->userpwd = progcache__strdup(text);
    } else {
        wipe_free(text);
        return progcache__error(PROGCACHE_EINVAL,
                                "%s %s holds neither \"Bearer TOKEN\" nor \"user:password\" on "
                                "its first line",
                                AUTH_VAR, path);
    }
    wipe_free(text);
    return c->bearer || c->userpwd ? PROGCACHE_OK
                                   : progcache__error(PROGCACHE_ENOMEM, "out of memory");
}

/* The [profile] section's key of an AWS shared credentials file. */
static char *ini_value(const char *text, const char *profile, const char *key)
{
    int in = 0;
    size_t pl = strlen(profile), kl = strlen(key);
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        while (len && (line[len - 1] == '\r' || line[len - 1] == ' '))
            len--;
        while (len && (*line == ' ' || *line == '\t'))
            line++, len--;
        if (len && line[0] == '[')
            in = len == pl + 2 && line[len - 1] == ']' && !memcmp(line + 1, profile, pl);
        else if (in && len > kl && !memcmp(line, key, kl)) {
            const char *v = line + kl;
            while (v < line + len && *v == ' ')
                v++;
            if (v < line + len && *v == '=') {
                for (v++; v < line + len && *v == ' ';)
                    v++;
                return dup_n(v, (size_t)(line + len - v));
            }
        }
        line = end ? end + 1 : NULL;
    }
    return NULL;
}

/* AWS credentials: the variables, else the shared credentials file's
 * profile (AWS_PROFILE, default "default"). */
static int s3_credentials(progcache__http_config *c)
{
    const char *id = progcache__config_env("AWS_ACCESS_KEY_ID");
    const char *key = progcache__config_env("AWS_SECRET_ACCESS_KEY");
    const char *token = progcache__config_env("AWS_SESSION_TOKEN");
    char *fid = NULL, *fkey = NULL, *ftoken = NULL, *text = NULL, *path = NULL;
    int rc = PROGCACHE_OK;
    if (!id || !key) {
        const char *file = progcache__config_env("AWS_SHARED_CREDENTIALS_FILE");
        const char *home = progcache__config_env("HOME");
        const char *profile = progcache__config_env("AWS_PROFILE");
        path = file ? progcache__strdup(file) : home ? join3(home, "/.aws/credentials", "")
                                                     : NULL;
        if (!profile)
            profile = "default";
        if (path && access(path, F_OK) == 0 &&
            (rc = read_small(&text, path, "the AWS credentials file")) == PROGCACHE_OK) {
            fid = ini_value(text, profile, "aws_access_key_id");
            fkey = ini_value(text, profile, "aws_secret_access_key");
            ftoken = ini_value(text, profile, "aws_session_token");
        }
        if (rc == PROGCACHE_OK && (!fid || !fkey))
            rc = progcache__error(PROGCACHE_EINVAL,
                                  "the S3 tier %s has no credentials: set AWS_ACCESS_KEY_ID and "
                                  "AWS_SECRET_ACCESS_KEY, or give profile \"%s\" in %s",
                                  c->where, profile, path ? path : "~/.aws/credentials");
        id = fid, key = fkey, token = ftoken;
    }
    if (rc == PROGCACHE_OK) {
        c->userpwd = join3(id, ":", key);
        if (token)
            c->token_header = join3("x-amz-security-token: ", token, "");
        if (!c->userpwd || (token && !c->token_header))
            rc = progcache__error(PROGCACHE_ENOMEM, "out of memory");
    }
    wipe_free(fid), wipe_free(fkey), wipe_free(ftoken), wipe_free(text);
    progcache__free(path);
    return rc;
}

static int bad(const char *where, const char *why)
{
    return progcache__error(PROGCACHE_EINVAL, "the remote tier %s: %s", where, why);
}

/* s3://BUCKET/PREFIX?endpoint=URL&region=REGION */
static int parse_s3(progcache__http_config *c, const char *rest, const char *q)
{
    char *endpoint = NULL, *region = NULL, *sig = NULL;
    size_t blen = strcspn(rest, "/");
    const char *prefix = rest[blen] ? rest + blen + 1 : "";
    int rc = query_value(&endpoint, q, "endpoint");
    if (!rc)
        rc = query_value(&region, q, "region");
    if (!rc && blen == 0)
        rc = bad(c->where, "no bucket: give s3://BUCKET/PREFIX");
    if (!rc && strspn(rest, "abcdefghijklmnopqrstuvwxyz0123456789.-") < blen)
        rc = bad(c->where, "the bucket name holds a character S3 does not allow");
    if (!rc && endpoint && strncmp(endpoint, "http://", 7) && strncmp(endpoint, "https://", 8))
        rc = bad(c->where, "endpoint= must be an http:// or https:// URL");
    if (!rc && !region) {
        const char *r = progcache__config_env("AWS_REGION");
        if (!r)
            r = progcache__config_env("AWS_DEFAULT_REGION");
        if (!(region = progcache__strdup(r ? r : "us-east-1")))
            rc = PROGCACHE_ENOMEM;
    }
    if (!rc && strspn(region, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(region))
        rc = bad(c->where, "region= holds a character no region name has");
    if (!rc) {
        char bucket[64];
        snprintf(bucket, sizeof bucket, "%.*s", (int)(blen > 63 ? 63 : blen), rest);
        size_t pl = strlen(prefix);
        const char *slash = pl && prefix[pl - 1] != '/' ? "/" : "";
        char *host = NULL;
        if (endpoint) { /* path style: what S3-compatible servers all take */
            size_t el = strlen(endpoint);
            while (el && endpoint[el - 1] == '/')
                endpoint[--el] = 0;
            host = join3(endpoint, "/", bucket);
        } else {
            char h[160];
            snprintf(h, sizeof h, "https://%s.s3.%s.amazonaws.com", bucket, region);
            host = progcache__strdup(h);
        }
        char *mid = host ? join3(host, "/", prefix) : NULL;
        c->base = mid ? join3(mid, slash, "") : NULL;
        sig = join3("aws:amz:", region, ":s3");
        c->sigv4 = sig;
        c->root = host;
        c->prefix = join3(prefix, slash, "");
        progcache__free(mid);
        rc = c->base && c->sigv4 && c->root && c->prefix ? s3_credentials(c) : PROGCACHE_ENOMEM;
    }
    progcache__free(endpoint);
    progcache__free(region);
    return rc;
}

int progcache__http_config_init(progcache__http_config *c, const char *url,
                                const progcache_store_params *params, uint64_t min_rate,
                                const char *ca_file, const char *ca_label)
{
    memset(c, 0, sizeof *c);
    c->timeout_ms = DEFAULT_TIMEOUT_MS;
    c->max_artifact_size = params && params->max_artifact_size
                               ? params->max_artifact_size
                               : PROGCACHE_MAX_ARTIFACT_SIZE_DEFAULT;
    c->min_rate = min_rate ? min_rate : (UINT64_C(1) << 20);
    c->log = params ? params->log : NULL;
    c->log_ctx = params ? params->log_ctx : NULL;
    size_t len = strlen(url), qpos = strcspn(url, "?");
    const char *q = url[qpos] ? url + qpos + 1 : NULL;
    size_t slen = strcspn(url, ":");
    int s3 = slen == 2;
    const char *rest = url + slen + 1;
    int rc = PROGCACHE_OK;
    if (!(c->where = dup_n(url, qpos)))
        return progcache__error(PROGCACHE_ENOMEM, "out of memory");
    if (len > MAX_URL)
        rc = bad("URL", "it is longer than 2048 bytes");
    else if (!progcache__http_scheme(url, slen) || strncmp(rest, "//", 2) != 0)
        rc = bad(c->where, "give http://HOST[:PORT]/PREFIX/, https://... or s3://BUCKET/PREFIX");
    else if (strpbrk(url, " \t\r\n\"<>\\^`{|}"))
        rc = bad(c->where, "the URL holds a space, a control character or a quote");
    rest += 2;
    size_t alen = strcspn(rest, "/?");
    const char *at = rc ? NULL : memchr(rest, '@', alen);
    if (at) {
        /* Not shown: the part before '@' is a credential. */
        char shown[256];
        snprintf(shown, sizeof shown, "%.*s://%.*s", (int)slen, url,
                 (int)strcspn(at + 1, "/?") > 200 ? 200 : (int)strcspn(at + 1, "/?"), at + 1);
        progcache__free(c->where);
        c->where = progcache__strdup(shown);
        rc = progcache__error(PROGCACHE_EINVAL,
                              "the remote tier %s: credentials in the URL are refused (a URL is "
                              "shown in messages); put them in the file %s names",
                              shown, s3 ? "AWS_SHARED_CREDENTIALS_FILE" : AUTH_VAR);
    }
    if (!rc && alen == 0)
        rc = bad(c->where, "no host (or bucket)");
    if (!rc)
        rc = query_check(q, c->where, s3);
    char *t = NULL;
    if (!rc && !(rc = query_value(&t, q, "timeout_ms")) && t) {
        char *end = NULL;
        unsigned long v = strtoul(t, &end, 10);
        if (!*t || *end || v == 0 || v > MAX_TIMEOUT_MS)
            rc = bad(c->where, "timeout_ms= must be 1 to 600000 (milliseconds)");
        c->timeout_ms = (unsigned int)v;
    }
    progcache__free(t);
    if (!rc && s3) {
        char *r = dup_n(rest, strcspn(rest, "?"));
        rc = r ? parse_s3(c, r, q) : PROGCACHE_ENOMEM;
        progcache__free(r);
    } else if (!rc) {
        size_t plen = strcspn(url, "?");
        const char *slash = url[plen - 1] == '/' ? "" : "/";
        char *b = dup_n(url, plen);
        c->base = b ? join3(b, slash, "") : NULL;
        progcache__free(b);
        rc = c->base ? http_credentials(c) : PROGCACHE_ENOMEM;
    }
    /* The CA is read here, through the descriptor it was checked on, and
     * handed to libcurl as bytes (CURLOPT_CAINFO_BLOB), never as a path
     * libcurl would open again later (rule 4). */
    const char *ca = ca_file ? ca_file : progcache__config_env("PROGCACHE_REMOTE_CA");
    if (!rc && ca) {
        const char *label = ca_file && ca_label ? ca_label : "PROGCACHE_REMOTE_CA";
        rc = progcache__remote_file_read(&c->ca, ca, label, MAX_CA_FILE, 0);
        if (!rc && !(c->ca_file = progcache__strdup(ca)))
            rc = PROGCACHE_ENOMEM;
    }
    c->s3 = s3;
    if (rc == PROGCACHE_ENOMEM)
        progcache__error(PROGCACHE_ENOMEM, "the remote tier %s: out of memory", c->where);
    if (rc)
        progcache__http_config_release(c);
    return rc;
}

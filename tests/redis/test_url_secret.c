/* No message holds a Redis password, whatever the URL's shape (issue 29;
 * src/util/url_mask.c, src/store/redis/redis_config.c): a deterministic,
 * bounded fuzz over URL shapes made from pieces (redis://, rediss://,
 * unknown schemes, unix: with password= twice, a name ending in password=,
 * bad ports, hosts, databases, items and fragments, a password holding
 * '/', '?', '#', '@' or ':'), each with a random password written as it is
 * or %-encoded. For every URL, the secret appears in none of: the parser's
 * message or its description of the address; progcache_store_redis_new's
 * message and log; progcache_redis_status_get's address and error; for
 * some, progcache_open's message and log with PROGCACHE_REMOTE set, and
 * the output of `progcache remote --url`, and of `progcache remote` and
 * `progcache config` with PROGCACHE_REMOTE. Where a URL parses, the parser
 * hands the password back apart, whole. Needs no server (addresses that
 * refuse at once); runs with and without hiredis. */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "progcache/remote.h"
#include "store/redis/redis_config.h"

#define URLS 3000
/* Prime to the number of shapes, so that every shape gets its turn. */
#define OPEN_EVERY 7  /* progcache_open with PROGCACHE_REMOTE */
#define TOOL_EVERY 37 /* the progcache command */

static char *scratch;
static char secret[64], written[200]; /* the password, and as in the URL */
static const char *where_now;         /* the URL, for a failure's report */
static unsigned long long seed = 0x2545f4914f6cdd1dULL;

static unsigned int next(void)
{
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    return (unsigned int)(seed >> 32);
}

static void no_secret(const char *text, const char *what)
{
    if (text && (strstr(text, secret) || strstr(text, written))) {
        fprintf(stderr, "URL %s: the password %s is in %s: %s\n", where_now, secret, what, text);
        CHECK(0);
    }
}

static void heard(void *ctx, int level, const char *message)
{
    (void)level;
    no_secret(message, ctx);
}

/* A random password: 8 to 23 characters, '&' only outside unix: URLs
 * (there it ends the item: a URL the parser reads otherwise). */
static void make_secret(int in_unix, int encode)
{
    static const char tcp[] = "abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"
                              "/?#@:=%+!$*.-_~&";
    size_t alphabet = sizeof tcp - 1 - (in_unix ? 1 : 0);
    size_t len = 8 + next() % 16;
    for (size_t i = 0; i < len; i++)
        secret[i] = tcp[next() % alphabet];
    secret[len] = '\0';
    /* Two letters first: no secret is a common word of the messages. */
    secret[0] = "QZXJ"[next() % 4];
    secret[1] = "qzxj"[next() % 4];
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)secret[i];
        if (encode && !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                        (c >= '0' && c <= '9')))
            n += (size_t)snprintf(written + n, sizeof written - n, "%%%02X", c);
        else
            written[n++] = (char)c;
    }
    written[n] = '\0';
}

typedef struct shape {
    const char *format; /* one %s: the password as written */
    int in_unix;
    int password_is_secret; /* parsed: u.password is the secret */
} shape;

static const shape shapes[] = {
    {"redis://:%s@127.0.0.1:1", 0, 1},
    {"redis://user:%s@127.0.0.1:1/0", 0, 1},
    {"redis://%s@127.0.0.1:1", 0, 0},
    {"redis://user:%s@127.0.0.1:99999", 0, 0},
    {"redis://user:%s@", 0, 0},
    {"redis://user:%s@127.0.0.1:1/x", 0, 0},
    {"redis://user:%s@127.0.0.1:1/0?db=1", 0, 0},
    {"rediss://user:%s@127.0.0.1:1", 0, 0},
    {"http://user:%s@127.0.0.1:1", 0, 0},
    {"redis://user:%s@[::1", 0, 0},
    {"redis://us:er:%s@127.0.0.1:1", 0, 0},
    {"redis://user:%s@::1:6379", 0, 0},
    {"redis:/user:%s@127.0.0.1", 0, 0},
    {"user:%s@127.0.0.1:1", 0, 0},
    {"unix:/nonexistent/redis.sock?password=%s", 1, 1},
    {"unix:/nonexistent/redis.sock?db=0&user=u&password=%s", 1, 1},
    {"unix:/nonexistent/redis.sock?password=other&password=%s", 1, 0},
    {"unix:/nonexistent/redis.sock?password=%s&password=other", 1, 0},
    {"unix:/nonexistent/redis.sock?xpassword=%s", 1, 0},
    {"unix:/nonexistent/redis.sock?xpassword=z&password=%s", 1, 0},
    {"unix:/nonexistent/redis.sock?db=x&password=%s", 1, 0},
    {"unix:/nonexistent/redis.sock?password=%s&db=x", 1, 0},
    {"unix:relative.sock?password=%s", 1, 0},
    {"unix:/nonexistent/redis.sock#frag?password=%s", 1, 0},
    {"unix:/nonexistent/a-socket-path-longer-than-sun-path-holds/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa?password=%s", 1, 0},
    {"unix:/nonexistent/redis.sock?password=%s&color=red", 1, 0},
    {"unix:/nonexistent/redis.sock?password=%s&db", 1, 0},
    {"unix:///nonexistent/redis.sock?password=%s", 1, 1},
    {"unix:/nonexistent/redis.sock?passwd=%s", 1, 0},
    {"unix:/nonexistent/redis.sock?password=%s#frag", 1, 0},
};
#define SHAPES (sizeof shapes / sizeof shapes[0])

/* The progcache command's stdout and stderr, checked: `progcache remote
 * --url URL` (how 0), `progcache remote` (1) and `progcache config` (2)
 * with PROGCACHE_REMOTE=URL. */
static void tool(const char *url, int how)
{
    static const char *const said_by[] = {"progcache remote --url",
                                          "progcache remote (PROGCACHE_REMOTE)",
                                          "progcache config (PROGCACHE_REMOTE)"};
    const char *bin = getenv("PROGCACHE_BIN");
    char out_path[4200];
    snprintf(out_path, sizeof out_path, "%s/tool-output", scratch);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
            _exit(99);
        if (how == 0)
            execl(bin, bin, "remote", "--url", url, (char *)NULL);
        setenv("PROGCACHE_REMOTE", url, 1);
        if (how == 1)
            execl(bin, bin, "remote", (char *)NULL);
        else
            execl(bin, bin, "config", (char *)NULL);
        _exit(98);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) < 98);
    char *text = test_read_file(out_path, NULL);
    CHECK(text != NULL);
    no_secret(text, said_by[how]);
    free(text);
}

static void one(const shape *sh, size_t i, const char *cache_dir)
{
    char url[600];
    make_secret(sh->in_unix, (i / SHAPES) % 2);
    snprintf(url, sizeof url, sh->format, written);
    where_now = url;

    progcache__redis_url u;
    if (progcache__redis_url_parse(&u, url) == PROGCACHE_OK) {
        char shown[PROGCACHE__REDIS_WHERE_SIZE];
        progcache__redis_url_describe(shown, sizeof shown, &u);
        no_secret(shown, "the description");
        /* Handed back apart, whole ('%' raw may be a valid escape). */
        if (sh->password_is_secret && (strcmp(written, secret) || !strchr(secret, '%')))
            CHECK(u.password && !strcmp(u.password, secret));
        progcache__redis_url_release(&u);
    } else {
        no_secret(progcache_error_last(), "the parser's message");
    }
    char masked[700];
    progcache_url_mask(masked, sizeof masked, url);
    no_secret(masked, "progcache_url_mask");

    progcache_redis_options ro = PROGCACHE_REDIS_OPTIONS_INIT;
    ro.url = url;
    ro.connect_timeout_ms = 50;
    ro.log = heard;
    ro.log_ctx = "the Redis store's log";
    progcache_store *s = NULL;
    if (progcache_store_redis_new(&s, &ro) != PROGCACHE_OK) {
        no_secret(progcache_error_last(), "progcache_store_redis_new's message");
    } else {
        progcache_redis_status st = PROGCACHE_REDIS_STATUS_INIT;
        if (progcache_redis_status_get(&st, s, 1) != PROGCACHE_OK)
            no_secret(progcache_error_last(), "progcache_redis_status_get's message");
        no_secret(st.where, "the status's address");
        no_secret(st.error, "the status's error");
        progcache_store_free(s);
    }

    if (i % OPEN_EVERY == 0) {
        setenv("PROGCACHE_REMOTE", url, 1);
        progcache_options o = PROGCACHE_OPTIONS_INIT;
        o.log = heard;
        o.log_ctx = "progcache_open's log";
        progcache *c = NULL;
        if (progcache_open(&c, cache_dir, &o) != PROGCACHE_OK)
            no_secret(progcache_error_last(), "progcache_open's message");
        progcache_close(c);
        unsetenv("PROGCACHE_REMOTE");
    }
    if (i % TOOL_EVERY == 0 && getenv("PROGCACHE_BIN"))
        tool(url, (int)((i / TOOL_EVERY) % 3));
}

int main(void)
{
    unsetenv("PROGCACHE_REMOTE_SECRET_FILE");
    scratch = test_mkdtemp("urlsecret");
    char cache_dir[4200];
    snprintf(cache_dir, sizeof cache_dir, "%s/cache", scratch);
    for (size_t i = 0; i < URLS; i++)
        one(&shapes[i % SHAPES], i, cache_dir);
    test_rmdtemp(scratch);
    printf("test_url_secret: %d URLs of %zu shapes, no message holds a password\n", URLS,
           SHAPES);
    return 0;
}

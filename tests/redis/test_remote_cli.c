/* What an operator sees of the remote tier (docs/REMOTE.md, "Operating
 * it"): `progcache remote` with the configuration a program would use, and
 * the one line a tool prints when the tier fails. Runs the built
 * `progcache` ($PROGCACHE_BIN) against this test's own redis-server, with
 * a password that must never be printed. */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "progcache/sys/store.h"
#include "redis_fixture.h"

static test_redis server;
static char *scratch;

typedef struct run_out {
    int status;
    char *out, *err;
} run_out;

/* Run progcache with args, PROGCACHE_REMOTE=url (NULL: unset). */
static run_out run(const char *url, const char *const *args)
{
    const char *bin = getenv("PROGCACHE_BIN");
    CHECK(bin != NULL);
    char out_path[4096], err_path[4096];
    snprintf(out_path, sizeof out_path, "%s/out", scratch);
    snprintf(err_path, sizeof err_path, "%s/err", scratch);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        int o = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
            _exit(127);
        if (url)
            setenv("PROGCACHE_REMOTE", url, 1);
        else
            unsetenv("PROGCACHE_REMOTE");
        unsetenv("PROGCACHE_REMOTE_SECRET_FILE");
        const char *argv[16] = {bin};
        for (int i = 0; args[i] && i < 14; i++)
            argv[i + 1] = args[i];
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    run_out r;
    CHECK(waitpid(pid, &r.status, 0) == pid);
    CHECK(WIFEXITED(r.status));
    r.status = WEXITSTATUS(r.status);
    size_t n;
    r.out = test_read_file(out_path, &n);
    r.err = test_read_file(err_path, &n);
    CHECK(r.out && r.err);
    return r;
}

static void run_free(run_out *r)
{
    free(r->out);
    free(r->err);
}

static int lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void test_remote_command(void)
{
    const char *plain[] = {"remote", NULL};
    run_out r = run(server.url, plain);
    if (r.status != 0)
        fprintf(stderr, "%s%s", r.out, r.err);
    CHECK(r.status == 0);
    CHECK(strstr(r.out, "reachable          yes\n") != NULL);
    CHECK(strstr(r.out, "server auth        on") != NULL);
    CHECK(strstr(r.out, "entries            0") != NULL);
    CHECK(strstr(r.out, "leases held now    0") != NULL);
    CHECK(strstr(r.out, "status             usable") != NULL);
    CHECK(strstr(r.out, "redis://:***@127.0.0.1:") != NULL);
    CHECK(!strstr(r.out, server.password) && !strstr(r.err, server.password));
    run_free(&r);

    const char *json[] = {"remote", "--json", NULL};
    r = run(server.url, json);
    CHECK(r.status == 0 && strstr(r.out, "\"reachable\": true") &&
          strstr(r.out, "\"usable\": true"));
    run_free(&r);

    /* Unusable, each for its reason, exit 1, the password never shown. */
    char url[512];
    snprintf(url, sizeof url, "redis://:wrong-password@127.0.0.1:%d", server.port);
    r = run(url, plain);
    CHECK(r.status == 1 && strstr(r.out, "AUTH refused") && strstr(r.out, "UNUSABLE"));
    CHECK(!strstr(r.out, "wrong-password") && !strstr(r.err, "wrong-password"));
    run_free(&r);

    snprintf(url, sizeof url, "redis://:%s@127.0.0.1:%d", server.password, test_free_port());
    r = run(url, plain);
    CHECK(r.status == 1 && strstr(r.out, "cannot connect"));
    run_free(&r);

    snprintf(url, sizeof url, "rediss://:%s@127.0.0.1:%d", server.password, server.port);
    r = run(url, plain);
    CHECK(r.status == 1 && strstr(r.err, "TLS (rediss://) is not supported"));
    CHECK(strstr(r.err, "docs/REMOTE.md \"TLS\"") != NULL);
    CHECK(!strstr(r.err, server.password));
    run_free(&r);

    r = run(NULL, plain);
    CHECK(r.status == 1 && strstr(r.err, "no remote tier is configured"));
    run_free(&r);
}

/* A tool whose remote tier is down does its work on the local tiers, and
 * says so in one line naming the server (without its password). */
static void test_tool_warns_once(void)
{
    char dir[4096], file[4096], url[512];
    snprintf(dir, sizeof dir, "%s/cache", scratch);
    snprintf(file, sizeof file, "%s/value", scratch);
    FILE *f = fopen(file, "w");
    CHECK(f && fputs("a value\n", f) >= 0 && fclose(f) == 0);
    int port = test_free_port();
    snprintf(url, sizeof url, "redis://:secret-pw@127.0.0.1:%d", port);
    const char *put[] = {"put", "--dir", dir,
                         "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
                         file, NULL};
    run_out r = run(url, put);
    CHECK(r.status == 0);
    char want[512];
    snprintf(want, sizeof want,
             "progcache put: warning: Redis redis://:***@127.0.0.1:%d/0: cannot connect", port);
    if (lines(r.err) != 1 || !strstr(r.err, want))
        fprintf(stderr, "stderr: %s", r.err);
    CHECK(lines(r.err) == 1 && strstr(r.err, want) == r.err);
    CHECK(!strstr(r.err, "secret-pw"));
    run_free(&r);
    const char *stats[] = {"stats", "--dir", dir, "--json", NULL};
    r = run(NULL, stats);
    CHECK(r.status == 0 && strstr(r.out, "\"remote_errors\": ") &&
          !strstr(r.out, "\"remote_errors\": 0,"));
    run_free(&r);
}

/* ---- ls, verify and export of a remote store (--remote) ----------------- */

static const char PTX[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                          ".visible .entry kernel_a()\n{\n\tret;\n}\n";

static void key_hex(char out[65], const char *key)
{
    test_redis_name(out, 65, "", key, strlen(key));
}

/* Entries put through the library; ls, export (then import into a file
 * cache, byte-exact), verify; then a damaged value. */
static void test_admin_remote(void)
{
    progcache_redis_options o = PROGCACHE_REDIS_OPTIONS_INIT;
    o.url = server.url;
    o.flags = PROGCACHE_REDIS_SYNC_PUT;
    progcache_store *s = NULL;
    CHECK_OK(progcache_store_redis_new(&s, &o));
    static const char *keys[] = {"first kernel", "second kernel"};
    char big[300000]; /* two GETRANGE parts */
    memset(big, ' ', sizeof big);
    memcpy(big, PTX, sizeof PTX - 1);
    big[sizeof big - 1] = '\n';
    CHECK_OK(progcache_store_put(s, keys[0], strlen(keys[0]), PTX, sizeof PTX - 1));
    CHECK_OK(progcache_store_put(s, keys[1], strlen(keys[1]), big, sizeof big));
    char hex[2][65];
    key_hex(hex[0], keys[0]);
    key_hex(hex[1], keys[1]);

    const char *ls[] = {"ls", "--remote", server.url, NULL};
    run_out r = run(NULL, ls);
    if (r.status != 0)
        fprintf(stderr, "%s%s", r.out, r.err);
    CHECK(r.status == 0 && lines(r.out) == 1 + 2); /* the header, then each entry */
    CHECK(!strncmp(r.out, "NAME ", 5));
    CHECK(strstr(r.out, hex[0]) && strstr(r.out, hex[1]) && strstr(r.out, "PTX"));
    CHECK(strstr(r.out, "kernel_a") && !strstr(r.out, "(bad"));
    run_free(&r);
    const char *ls_json[] = {"ls", "--remote", server.url, "--json", NULL};
    r = run(NULL, ls_json);
    CHECK(r.status == 0 && strstr(r.out, "\"remote\": \"redis://:***@127.0.0.1:"));
    CHECK(!strstr(r.out, server.password) && !strstr(r.err, server.password));
    run_free(&r);

    /* export --remote, import into a file cache: the same bytes. */
    char archive[4096], dir[4096];
    snprintf(archive, sizeof archive, "%s/remote.tar", scratch);
    snprintf(dir, sizeof dir, "%s/imported", scratch);
    const char *export[] = {"export", "--remote", server.url, archive, NULL};
    r = run(NULL, export);
    CHECK(r.status == 0 && strstr(r.out, "exported 2 entries"));
    CHECK(strstr(r.out, "from redis://:***@127.0.0.1:") && !strstr(r.out, server.password));
    run_free(&r);
    const char *import[] = {"import", "--dir", dir, archive, NULL};
    r = run(NULL, import);
    CHECK(r.status == 0 && strstr(r.out, "imported 2 entries"));
    run_free(&r);
    progcache_store *file = NULL;
    CHECK_OK(progcache_store_file_new(&file, dir, NULL));
    progcache_buf buf = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache_store_get(&buf, file, keys[0], strlen(keys[0])));
    CHECK(buf.size == sizeof PTX - 1 && !memcmp(buf.data, PTX, buf.size));
    CHECK_OK(progcache_store_get(&buf, file, keys[1], strlen(keys[1])));
    CHECK(buf.size == sizeof big && !memcmp(buf.data, big, buf.size));
    progcache_buf_free(&buf);
    progcache_store_free(file);

    const char *verify[] = {"verify", "--remote", server.url, NULL};
    r = run(NULL, verify);
    CHECK(r.status == 0 && strstr(r.out, "checked 2 entries in redis://:***@"));
    run_free(&r);

    /* A damaged value (its second part): verify says which, export leaves
     * it out and says so. */
    char name[300];
    size_t len;
    test_redis_name(name, sizeof name, "progcache:", keys[1], strlen(keys[1]));
    char *v = test_redis_get(&server, name, &len);
    CHECK(v && len == 56 + sizeof big);
    v[len - 1000] ^= 1;
    test_redis_set(&server, name, v, len);
    free(v);
    r = run(NULL, verify);
    CHECK(r.status == 1 && strstr(r.out, "bad ") && strstr(r.out, hex[1]));
    CHECK(strstr(r.out, "SHA-256 does not match") && strstr(r.out, "1 bad"));
    run_free(&r);
    r = run(NULL, export);
    CHECK(r.status == 1 && strstr(r.out, "exported 1 entry"));
    CHECK(strstr(r.err, "not exported") && strstr(r.err, hex[1]));
    run_free(&r);

    /* --fix is refused; a server that is not there, exit 3. */
    const char *fix[] = {"verify", "--remote", server.url, "--fix", NULL};
    r = run(NULL, fix);
    CHECK(r.status == 2 && strstr(r.err, "removed by its key"));
    run_free(&r);
    char gone[128];
    snprintf(gone, sizeof gone, "redis://127.0.0.1:%d", test_free_port());
    const char *ls_gone[] = {"ls", "--remote", gone, NULL};
    r = run(NULL, ls_gone);
    CHECK(r.status == 3 && strstr(r.err, "cannot list the remote store"));
    run_free(&r);
    progcache_store_free(s);
}

/* What `export --remote` calls, on a store whose tier has no foreach: a
 * clear error, and no archive (not even a temporary file) left behind. */
static int no_get(progcache_buf *out, progcache_store *st, const void *k, size_t n)
{
    (void)out, (void)st, (void)k, (void)n;
    return PROGCACHE_ENOTFOUND;
}
static int no_put(progcache_store *st, const void *k, size_t n, const void *d, size_t size)
{
    (void)st, (void)k, (void)n, (void)d, (void)size;
    return PROGCACHE_OK;
}
static int no_remove(progcache_store *st, const void *k, size_t n)
{
    (void)st, (void)k, (void)n;
    return PROGCACHE_ENOTFOUND;
}
static int no_clear(progcache_store *st) { (void)st; return PROGCACHE_OK; }
static int no_count(uint64_t *out, progcache_store *st)
{
    (void)st;
    *out = 0;
    return PROGCACHE_OK;
}
static void no_free(progcache_store *st) { (void)st; }

static void test_unlistable(void)
{
    progcache_store st = PROGCACHE_STORE_INIT;
    st.name = "unlistable";
    st.get = no_get;
    st.put = no_put;
    st.remove = no_remove;
    st.clear = no_clear;
    st.count = st.total_size = no_count;
    st.free = no_free;
    char dir[4096], archive[4200];
    snprintf(dir, sizeof dir, "%s/unlistable", scratch);
    snprintf(archive, sizeof archive, "%s/a.tar", dir);
    CHECK(mkdir(dir, 0700) == 0);
    CHECK_RC(PROGCACHE_EINVAL, progcache_store_export(NULL, &st, archive, NULL));
    CHECK(strstr(progcache_error_last(), "the \"unlistable\" store cannot be listed"));
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    int files = 0;
    for (struct dirent *e; (e = readdir(d));)
        files += strcmp(e->d_name, ".") && strcmp(e->d_name, ".."); /* a.tar, a temp file */
    closedir(d);
    CHECK(files == 0);
}

int main(void)
{
    test_redis_require();
    scratch = test_mkdtemp("remote-cli");
    test_redis_start(&server, "cli-password-42");
    test_remote_command();
    test_tool_warns_once();
    test_admin_remote();
    test_unlistable();
    test_redis_stop(&server);
    test_rmtree(scratch);
    free(scratch);
    printf("test_remote_cli: ok\n");
    return 0;
}

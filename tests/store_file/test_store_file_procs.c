/* Many processes on one cache directory at once, mixing get, put, remove,
 * clear and (with a small cap) eviction: every value any process reads is
 * exactly a value some process wrote for that key, no operation fails, and
 * the directory ends within the cap plus what the last writers added. */
#include <errno.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "values.h"

#define PROCS 16
#define OPS 5000
#define KEYS 64
/* Values of up to 6016 bytes (header "PCKV"). */
static const test_values values = {0x50434b56u, 16, 6000, 977, 131, 40503u};

static size_t make_value(unsigned char *out, uint32_t key, uint32_t version)
{
    return test_value_make(out, &values, key, version);
}

static int value_ok(const unsigned char *v, size_t size, uint32_t key)
{
    static unsigned char expect[6100];
    return test_value_ok(v, size, &values, key, expect);
}

static int worker(const char *dir, int id, uint64_t cap)
{
    progcache_file_options opts = PROGCACHE_FILE_OPTIONS_INIT;
    opts.max_size = cap;
    progcache_store *s = NULL;
    if (progcache_store_file_new(&s, dir, &opts) != PROGCACHE_OK) {
        fprintf(stderr, "worker %d: open: %s\n", id, progcache_error_last());
        return 2;
    }
    static unsigned char value[6100];
    progcache_buf buf = PROGCACHE_BUF_INIT;
    uint32_t rng = 12345u + (uint32_t)id * 7919u;
    int bad = 0, errors = 0, hits = 0;
    for (int op = 0; op < OPS; op++) {
        rng = rng * 1664525u + 1013904223u;
        uint32_t key = (rng >> 8) % KEYS;
        char k[16];
        snprintf(k, sizeof k, "key-%u", key);
        int what = (int)((rng >> 20) % 1000);
        int rc;
        if (what == 999) {
            rc = progcache_store_clear(s);
        } else if (what < 400) {
            size_t len = make_value(value, key, (uint32_t)(id * OPS + op));
            rc = progcache_store_put(s, k, strlen(k), value, len);
        } else if (what < 900) {
            rc = progcache_store_get(&buf, s, k, strlen(k));
            if (rc == PROGCACHE_OK) {
                hits++;
                if (!value_ok(buf.data, buf.size, key))
                    bad++;
            }
        } else {
            rc = progcache_store_remove(s, k, strlen(k));
        }
        if (rc != PROGCACHE_OK && rc != PROGCACHE_ENOTFOUND) {
            fprintf(stderr, "worker %d op %d: %s\n", id, op, progcache_error_last());
            errors++;
        }
    }
    printf("worker %d: %d hits, %d wrong, %d errors\n", id, hits, bad, errors);
    fflush(stdout);
    progcache_buf_free(&buf);
    progcache_store_free(s);
    return bad || errors ? 1 : 0;
}

static void run(uint64_t cap)
{
    char *dir = test_mkdtemp("procs");
    pid_t pids[PROCS];
    for (int i = 0; i < PROCS; i++) {
        pids[i] = fork();
        CHECK(pids[i] >= 0);
        if (pids[i] == 0)
            _exit(worker(dir, i, cap));
    }
    for (int i = 0; i < PROCS; i++) {
        int status;
        CHECK(waitpid(pids[i], &status, 0) == pids[i]);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    progcache_store *s = NULL;
    progcache_file_options opts = PROGCACHE_FILE_OPTIONS_INIT;
    opts.max_size = cap;
    CHECK_OK(progcache_store_file_new(&s, dir, &opts));
    progcache_buf buf = PROGCACHE_BUF_INIT;
    uint64_t on_disk = 0;
    for (uint32_t key = 0; key < KEYS; key++) {
        char k[16];
        snprintf(k, sizeof k, "key-%u", key);
        int rc = progcache_store_get(&buf, s, k, strlen(k));
        CHECK(rc == PROGCACHE_OK || rc == PROGCACHE_ENOTFOUND);
        if (rc == PROGCACHE_OK) {
            CHECK(value_ok(buf.data, buf.size, key));
            on_disk += buf.size;
        }
    }
    /* Within the cap plus one value per writer: a writer whose put lands
     * while another process runs an eviction pass skips its own. */
    if (cap)
        CHECK(on_disk <= cap + PROCS * 6016);
    printf("cap %llu: %llu bytes of live entries at the end\n", (unsigned long long)cap,
           (unsigned long long)on_disk);
    progcache_buf_free(&buf);
    progcache_store_free(s);
    test_rmdtemp(dir);
}

int main(void)
{
    run(0);
    run(64 * 1024);
    printf("test_store_file_procs: all passed\n");
    return 0;
}

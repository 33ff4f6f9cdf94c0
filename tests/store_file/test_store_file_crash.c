/* Writers killed with SIGKILL at random points during puts, round after
 * round: afterwards every entry read is exactly a value some writer
 * completed for that key (never torn, never another key's), and the temp
 * files they left are swept once stale. */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "values.h"

#define ROUNDS 200
#define KEYS 16
/* Values of up to 200064 bytes (header "CRSH"). */
static const test_values values = {0x43525348u, 64, 200000, 7919, 104729, 1};

static size_t make_value(unsigned char *out, uint32_t key, uint32_t version)
{
    return test_value_make(out, &values, key, version);
}

static int value_ok(const unsigned char *v, size_t size, uint32_t key, unsigned char *scratch)
{
    return test_value_ok(v, size, &values, key, scratch);
}

static void writer(const char *dir, uint32_t seed)
{
    progcache_store *s = NULL;
    progcache_file_options opts = PROGCACHE_FILE_OPTIONS_INIT;
    opts.max_size = 1500000; /* evictions run too */
    if (progcache_store_file_new(&s, dir, &opts)) {
        fprintf(stderr, "writer: open: %s\n", progcache_error_last());
        _exit(2);
    }
    static unsigned char value[200100];
    for (uint32_t i = 0;; i++) {
        uint32_t key = (seed + i * 5) % KEYS;
        size_t len = make_value(value, key, seed * 1000 + i);
        if (progcache_store_put(s, &key, sizeof key, value, len)) {
            fprintf(stderr, "writer: put: %s\n", progcache_error_last());
            _exit(3);
        }
    }
}

static size_t count_tmp(const char *dir)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/progcache/tmp", dir); /* where progcache writes them */
    DIR *d = opendir(p);
    size_t n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

int main(void)
{
    char *dir = test_mkdtemp("crash");
    static unsigned char scratch[200100];
    progcache_buf buf = PROGCACHE_BUF_INIT;
    unsigned int rng = 42;
    size_t checked = 0, leftovers = 0;
    for (int round = 0; round < ROUNDS; round++) {
        pid_t pids[3];
        for (int w = 0; w < 3; w++) {
            pids[w] = fork();
            CHECK(pids[w] >= 0);
            if (pids[w] == 0)
                writer(dir, (uint32_t)(round * 3 + w));
        }
        rng = rng * 1103515245u + 12345u;
        struct timespec ts = {0, (long)(200000 + (rng >> 8) % 5000000)}; /* 0.2-5 ms */
        nanosleep(&ts, NULL);
        for (int w = 0; w < 3; w++)
            kill(pids[w], SIGKILL);
        for (int w = 0; w < 3; w++) {
            int status;
            CHECK(waitpid(pids[w], &status, 0) == pids[w]);
            /* Killed, or exited because a put failed (which must not be). */
            CHECK(WIFSIGNALED(status));
        }
        progcache_store *s = NULL;
        CHECK_OK(progcache_store_file_new(&s, dir, NULL));
        for (uint32_t key = 0; key < KEYS; key++) {
            int rc = progcache_store_get(&buf, s, &key, sizeof key);
            CHECK(rc == PROGCACHE_OK || rc == PROGCACHE_ENOTFOUND);
            if (rc == PROGCACHE_OK) {
                CHECK(value_ok(buf.data, buf.size, key, scratch));
                checked++;
            }
        }
        progcache_store_free(s);
        leftovers += count_tmp(dir);
    }
    printf("%d rounds: %zu entries checked, %zu temp files seen after kills\n", ROUNDS, checked,
           leftovers);
    /* Make every leftover stale, then open: the sweep removes them all. */
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s/progcache/tmp", dir);
    DIR *d = opendir(tmp);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char p[4600];
        snprintf(p, sizeof p, "%s/%s", tmp, e->d_name);
        struct timespec old[2] = {{time(NULL) - 7200, 0}, {time(NULL) - 7200, 0}};
        utimensat(AT_FDCWD, p, old, 0);
    }
    if (d)
        closedir(d);
    progcache_store *s = NULL;
    CHECK_OK(progcache_store_file_new(&s, dir, NULL));
    CHECK(count_tmp(dir) == 0);
    progcache_store_free(s);
    CHECK(checked > 0);
    progcache_buf_free(&buf);
    test_rmdtemp(dir);
    printf("test_store_file_crash: all passed\n");
    return 0;
}

/* progcache_warm (src/program/program_warm.c): every program for every architecture
 * in one pass over a pool of threads; each item's key is the one a
 * program asking for the same compile derives (it then hits); a program
 * naming its own -arch is compiled once; a bad architecture list is
 * refused before anything is compiled; on_item can stop the warm. */
#include "check.h"
#include "progcache/warm.h"

static const char source[] = "extern \"C\" __global__ void scale(float *a, float s, int n)\n"
                             "{ int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                             "  if (i < n) a[i] *= s; }\n";
static const char *const std17[] = {"--std=c++17"};
static const char *const own_arch[] = {"-arch=sm_75"};
static const char *const archs[] = {"sm_80", "sm_90", "sm_100"};

typedef struct seen {
    int per_arch[4]; /* archs, then "as given" */
    int items, hits, stop_after;
    unsigned char keys[8][PROGCACHE_KEY_SIZE];
    size_t key_program[8], key_arch[8];
    uint64_t last_done, total;
} seen;

static int on_item(void *ctx, const progcache_warm_item *it, uint64_t done, uint64_t total)
{
    seen *s = ctx;
    CHECK(it->rc == PROGCACHE_OK && it->message == NULL);
    CHECK(it->has_key);
    CHECK(done == s->last_done + 1); /* serialised, counted once each */
    s->last_done = done;
    s->total = total;
    CHECK(it->arch <= 3);
    s->per_arch[it->arch]++;
    if (it->arch_name) {
        char want[32];
        snprintf(want, sizeof want, "-arch=%s", it->arch_name);
        CHECK(it->num_options == 2 && !strcmp(it->options[0], want));
    } else {
        CHECK(it->program == 1 && it->num_options == 1);
    }
    s->hits += it->status == PROGCACHE_STATUS_HIT;
    if (s->items < 8) {
        memcpy(s->keys[s->items], it->key, PROGCACHE_KEY_SIZE);
        s->key_program[s->items] = it->program;
        s->key_arch[s->items] = it->arch;
    }
    s->items++;
    return s->stop_after && s->items >= s->stop_after ? 42 : 0;
}

static progcache_program program(const char *const *options, size_t n)
{
    progcache_program p = PROGCACHE_PROGRAM_INIT;
    p.nvrtc.source = source;
    p.nvrtc.source_len = sizeof source - 1;
    p.nvrtc.target = PROGCACHE_TARGET_CUBIN;
    p.nvrtc.options = options;
    p.nvrtc.num_options = n;
    return p;
}

int main(void)
{
    char *dir;
    progcache *cache = test_cache_tmp(&dir, "warm");
    progcache_program progs[2] = {program(std17, 1), program(own_arch, 1)};
    progcache_warm_options o = PROGCACHE_WARM_OPTIONS_INIT;
    seen s;
    memset(&s, 0, sizeof s);
    o.archs = archs;
    o.num_archs = 3;
    o.jobs = 2;
    o.on_item = on_item;
    o.ctx = &s;
    progcache_warm_result res = PROGCACHE_WARM_RESULT_INIT;
    int rc = progcache_warm(&res, cache, progs, 2, &o);
    if (rc != PROGCACHE_OK && strstr(progcache_error_last(), "NVRTC")) {
        printf("SKIPPED: %s\n", progcache_error_last());
        return 77;
    }
    CHECK_OK(rc);
    CHECK(res.compiled == 4 && res.cached == 0 && res.failed == 0);
    CHECK(s.items == 4 && s.total == 4 && s.hits == 0);
    CHECK(s.per_arch[0] == 1 && s.per_arch[1] == 1 && s.per_arch[2] == 1 && s.per_arch[3] == 1);

    /* Each key is the one compile_or_load derives for that compile: a hit. */
    for (int i = 0; i < s.items; i++) {
        const char *opts[2];
        size_t n = 0;
        if (s.key_arch[i] < 3) {
            static char arch_opt[3][32];
            snprintf(arch_opt[s.key_arch[i]], 32, "-arch=%s", archs[s.key_arch[i]]);
            opts[n++] = arch_opt[s.key_arch[i]];
        }
        opts[n++] = progs[s.key_program[i]].nvrtc.options[0];
        progcache_program p = program(opts, n);
        p.flags = PROGCACHE_PROGRAM_NO_LOAD;
        progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
        CHECK_OK(progcache_compile_or_load(&r, cache, &p));
        CHECK(r.status == PROGCACHE_STATUS_HIT);
        CHECK(!memcmp(r.key, s.keys[i], PROGCACHE_KEY_SIZE));
        progcache_program_result_release(&r);
    }

    /* Again: all cached. */
    memset(&s, 0, sizeof s);
    CHECK_OK(progcache_warm(&res, cache, progs, 2, &o));
    CHECK(res.cached == 4 && res.compiled == 0 && s.hits == 4);

    /* on_item stops it: its value comes back, no compile after. */
    memset(&s, 0, sizeof s);
    s.stop_after = 1;
    o.jobs = 1;
    CHECK_RC(42, progcache_warm(&res, cache, progs, 2, &o));
    CHECK(s.items == 1);

    /* Bad lists: refused before any compile. */
    static const char *const bogus[] = {"sm_80", "bogus"};
    static const char *const twice[] = {"sm_90", "sm_90"};
    memset(&s, 0, sizeof s);
    o.archs = bogus;
    o.num_archs = 2;
    CHECK_RC(PROGCACHE_EINVAL, progcache_warm(&res, cache, progs, 2, &o));
    CHECK(strstr(progcache_error_last(), "\"bogus\" is not an architecture") != NULL);
    o.archs = twice;
    CHECK_RC(PROGCACHE_EINVAL, progcache_warm(&res, cache, progs, 2, &o));
    CHECK(strstr(progcache_error_last(), "twice") != NULL);
    o.archs = NULL;
    CHECK_RC(PROGCACHE_EINVAL, progcache_warm(&res, cache, progs, 2, &o));
    CHECK(s.items == 0);
    o.version = 2; /* newer than known */
    CHECK_RC(PROGCACHE_EINVAL, progcache_warm(&res, cache, progs, 2, &o));
    CHECK_RC(PROGCACHE_EINVAL, progcache_warm(&res, NULL, progs, 2, NULL));
    /* A result never initialised, or newer than known: refused, named. */
    progcache_warm_result blank;
    memset(&blank, 0, sizeof blank);
    CHECK_RC(PROGCACHE_EINVAL, progcache_warm(&blank, cache, progs, 2, NULL));
    CHECK(strstr(progcache_error_last(), "out->version is 0") != NULL);
    blank.version = PROGCACHE_WARM_RESULT_VERSION + 1;
    CHECK_RC(PROGCACHE_EINVAL, progcache_warm(&blank, cache, progs, 2, NULL));

    CHECK(progcache_arch_valid("sm_90a") && progcache_arch_valid("compute_80") &&
          progcache_arch_valid("sm_100f"));
    CHECK(!progcache_arch_valid("sm_") && !progcache_arch_valid("90") &&
          !progcache_arch_valid("sm_90x") && !progcache_arch_valid(NULL));

    test_cache_done(cache, dir);
    puts("test_warm: ok");
    return 0;
}

/* progcache warm: compile every program of a manifest into the cache, in
 * parallel, so that a cluster starts with a warm cache. The keys are the
 * ones progcache_compile_or_load (and cuda.core) derive, so a program that
 * later asks for the same compile gets a hit. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "warm.h"

#define CMD "warm"
#define MAX_JOBS 256

static const char usage_text[] =
    "usage: progcache warm [-a sm_XY] [-d DIR] [-j N] [--json]\n"
    "                      [--max-artifact-size SIZE] MANIFEST\n"
    "\n"
    "Compile every program listed in MANIFEST with NVRTC and store it in the cache,\n"
    "in N parallel threads; programs already cached are not compiled again. No GPU\n"
    "is needed. The keys are those 'progcache key' prints and programs using\n"
    "progcache_compile_or_load (or cuda.core) derive, so they find the entries.\n"
    "\n"
    "MANIFEST: one program per line,\n"
    "  SOURCE_FILE [--target cubin|ptx|ltoir] [--name NAME] [--name-expression E]...\n"
    "              [--name-expressions-bytes] [--header NAME=FILE]... [--extra-digest HEX]\n"
    "              [-- NVRTC_OPTION...]\n"
    "with the same meaning as for 'progcache key' (a relative header FILE is relative\n"
    "to the manifest's directory, as SOURCE_FILE is). '#' starts a comment; blank\n"
    "lines are skipped; words may be quoted with '...' or \"...\". A relative\n"
    "SOURCE_FILE is relative to the manifest's directory. MANIFEST '-' reads\n"
    "standard input (relative sources are then relative to the current directory).\n"
    "\n"
    "options:\n"
    "  -a, --arch sm_XY  put -arch=sm_XY first among each program's NVRTC options,\n"
    "                 unless the line gives its own -arch\n"
    "  -d, --dir DIR  the cache directory (default: $PROGCACHE_DIR, else cuda.core's);\n"
    "                 created if missing; its size cap (the setting max_size) applies\n"
    "  -j, --jobs N   compile N programs at once (default: the number of CPUs)\n"
    "  --json         print one JSON object with every program's key and outcome\n"
    "  --max-artifact-size SIZE  the largest manifest, source file or compiled\n"
    "                 program accepted (default: the setting max_artifact_size, 1G)\n"
    "  -q, --quiet    no progress bar\n"
    "  -h, --help     this text\n"
    "\n"
    "On a terminal a progress bar is drawn on standard error. At the end each\n"
    "program is printed as 'STATUS KEY MANIFEST:LINE SOURCE' (STATUS: compiled,\n"
    "cached or failed) with a summary, and why each failure failed.\n"
    "Exit status: 0 every program is in the cache; 1 a program did not compile (or\n"
    "its key cannot be derived safely); 2 bad usage or a malformed manifest; 3 the\n"
    "cache could not be used or a program could not be stored, or a source file\n"
    "cannot be read.\n";


/* ---- compiling ---------------------------------------------------------------- */

typedef struct warm_state {
    manifest *m;
    progcache *cache;
    pthread_mutex_t lock;
    size_t next, done;
    size_t compiled, cached, failed;
    int broken; /* a failure that is the system's, not the program's */
    tool_progress bar;
} warm_state;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void draw_progress(warm_state *s)
{
    char note[96];
    snprintf(note, sizeof note, "compiled %zu, cached %zu, failed %zu", s->compiled, s->cached,
             s->failed);
    tool_progress_note(&s->bar, "programs", s->done, s->m->len, note);
}

static void compile_one(program *p, progcache *cache)
{
    progcache_program prog = PROGCACHE_PROGRAM_INIT;
    prog.nvrtc.source = p->source;
    prog.nvrtc.source_len = p->source_len;
    prog.nvrtc.target = p->target;
    prog.nvrtc.options = (const char *const *)p->options;
    prog.nvrtc.num_options = p->num_options;
    prog.nvrtc.name = p->name;
    prog.nvrtc.name_expressions = (const char *const *)p->exprs;
    prog.nvrtc.num_name_expressions = p->num_exprs;
    prog.nvrtc.name_expressions_are_bytes = p->exprs_bytes;
    prog.nvrtc.extra_digest = p->digest;
    prog.nvrtc.extra_digest_len = p->digest_len;
    prog.nvrtc.headers = p->headers.items;
    prog.nvrtc.num_headers = p->headers.len;
    prog.flags = PROGCACHE_PROGRAM_NO_LOAD;
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    double t = now_ms();
    int rc = progcache_compile_or_load(&r, cache, &prog);
    p->ms = now_ms() - t;
    static const unsigned char no_key[PROGCACHE_KEY_SIZE];
    if (memcmp(r.key, no_key, sizeof no_key)) /* derived, even if compiling failed */
        progcache_key_hex(p->key_hex, r.key, sizeof r.key);
    if (rc) {
        p->result = FAILED;
        p->program_error = rc == PROGCACHE_ECOMPILE || rc == PROGCACHE_EUNSAFEKEY;
        p->error = strdup(progcache_error_last());
    } else if (r.store_error && !r.stored) {
        /* Compiled, but not in the cache: warming did not happen. (A failed
         * lookup or removal alone does not mean that.) Every failure, whole. */
        p->result = FAILED;
        p->error = r.cache_detail.size ? strndup((const char *)r.cache_detail.data,
                                                 r.cache_detail.size - 1)
                                       : strdup(r.cache_message);
    } else if (r.status != PROGCACHE_STATUS_HIT && !r.stored) {
        /* Compiled and, without a store error, not stored: the cache
         * directory is another user's, which is never written (said once
         * when the cache was opened). Warming did not happen. */
        p->result = FAILED;
        p->error = strdup("compiled, not stored: the cache directory belongs to another user, "
                          "and progcache never writes into another user's cache");
    } else {
        p->result = r.status == PROGCACHE_STATUS_HIT ? CACHED : COMPILED;
    }
    progcache_program_result_release(&r);
}

static void *worker(void *arg)
{
    warm_state *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        size_t i = s->next++;
        pthread_mutex_unlock(&s->lock);
        if (i >= s->m->len)
            return NULL;
        program *p = &s->m->items[i];
        compile_one(p, s->cache);
        pthread_mutex_lock(&s->lock);
        s->done++;
        if (p->result == COMPILED)
            s->compiled++;
        else if (p->result == CACHED)
            s->cached++;
        else
            s->failed++;
        if (p->result == FAILED && !p->program_error)
            s->broken = 1;
        draw_progress(s);
        pthread_mutex_unlock(&s->lock);
    }
}

static int run_workers(warm_state *s, unsigned jobs)
{
    pthread_t threads[MAX_JOBS];
    unsigned started = 0;
    if (jobs > s->m->len)
        jobs = (unsigned)s->m->len;
    for (; started < jobs; started++)
        if (pthread_create(&threads[started], NULL, worker, s) != 0)
            break;
    if (started == 0)
        worker(s); /* no thread could start: do it here */
    for (unsigned i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    return EXIT_OK;
}

/* ---- output ------------------------------------------------------------------- */

static const char *outcome_name(outcome o)
{
    switch (o) {
    case COMPILED: return "compiled";
    case CACHED: return "cached";
    case FAILED: return "failed";
    default: return "pending";
    }
}

static void print_json(const warm_state *s, const char *dir, const char *arch, double ms)
{
    tool_json_begin(stdout);
    printf(", \"dir\": ");
    tool_json_string(stdout, dir);
    printf(", \"arch\": ");
    if (arch)
        tool_json_string(stdout, arch);
    else
        printf("null");
    printf(", \"compiled\": %zu, \"cached\": %zu, \"failed\": %zu, \"ms\": %.1f, \"programs\": [",
           s->compiled, s->cached, s->failed, ms);
    for (size_t i = 0; i < s->m->len; i++) {
        const program *p = &s->m->items[i];
        printf("%s\n  {\"line\": %d, \"source\": ", i ? "," : "", p->line);
        tool_json_string(stdout, p->source_arg);
        printf(", \"target\": \"%s\", \"status\": \"%s\", \"key\": ",
               progcache_target_name(p->target), outcome_name(p->result));
        if (p->key_hex[0])
            tool_json_string(stdout, p->key_hex);
        else
            printf("null");
        printf(", \"ms\": %.1f, \"options\": [", p->ms);
        for (size_t k = 0; k < p->num_options; k++) {
            printf("%s", k ? ", " : "");
            tool_json_string(stdout, p->options[k]);
        }
        printf("], \"error\": ");
        if (p->error)
            tool_json_string(stdout, p->error);
        else
            printf("null");
        printf("}");
    }
    printf("\n]}\n");
}

static void print_text(const warm_state *s, const char *dir, const char *arch, double ms)
{
    for (size_t i = 0; i < s->m->len; i++) {
        const program *p = &s->m->items[i];
        printf("%-8s %s %s:%d %s\n", outcome_name(p->result), p->key_hex[0] ? p->key_hex : "-",
               s->m->path, p->line, p->source_arg);
    }
    printf("warmed %s%s%s: %zu compiled, %zu already cached, %zu failed (%zu programs in "
           "%.1f s)\n",
           dir, arch ? " for " : "", arch ? arch : "", s->compiled, s->cached, s->failed, s->m->len,
           ms / 1000);
    for (size_t i = 0; i < s->m->len; i++) {
        const program *p = &s->m->items[i];
        if (p->result == FAILED)
            fprintf(stderr, "progcache warm: %s:%d %s failed: %s\n", s->m->path, p->line,
                    p->source_arg, p->error ? p->error : "(no message)");
    }
}

static int valid_arch(const char *arch)
{
    const char *p = !strncmp(arch, "sm_", 3)        ? arch + 3
                    : !strncmp(arch, "compute_", 8) ? arch + 8
                                                    : NULL;
    if (!p || !(*p >= '0' && *p <= '9'))
        return 0;
    while (*p >= '0' && *p <= '9')
        p++;
    if (*p == 'a' || *p == 'f')
        p++;
    return *p == '\0';
}

int cmd_warm(int argc, char **argv)
{
    static const tool_option options[] = {
        {"arch", 'a', 1}, {"jobs", 'j', 1}, TOOL_MAX_ARTIFACT_SIZE_OPTION, {NULL, 0, 0}};
    const char *arch = NULL;
    uint64_t max = 0;
    long jobs = sysconf(_SC_NPROCESSORS_ONLN);
    manifest m = {NULL, 0, NULL, 0};
    tool_parser p;
    tool_parser_init(&p, CMD, usage_text, argc, argv, options, TOOL_JSON);
    for (int c; (c = tool_next(&p)) != TOOL_END;) {
        const char *v = p.arg;
        char *end;
        switch (c) {
        case TOOL_EXIT: return p.code;
        case 'a':
            if (!valid_arch(v))
                return tool_usage_error(CMD,
                                        "--arch \"%s\": give an architecture such as sm_90, "
                                        "sm_90a or compute_80",
                                        v);
            arch = v;
            break;
        case 'j':
            errno = 0;
            jobs = strtol(v, &end, 10);
            if (end == v || *end || errno || jobs < 1 || jobs > MAX_JOBS)
                return tool_usage_error(CMD, "--jobs \"%s\": give a number from 1 to %d", v,
                                        MAX_JOBS);
            break;
        case TOOL_OPT_MAX_ARTIFACT_SIZE:
            if (tool_max_size_value(CMD, v, &max))
                return EXIT_USAGE;
            break;
        default:
            if (m.path)
                return tool_usage_error(CMD, "more than one MANIFEST (\"%s\" and \"%s\")", m.path,
                                        v);
            m.path = v;
        }
    }
    int json = p.json;
    if (!m.path)
        return tool_usage_error(CMD, "give a MANIFEST (run 'progcache warm --help')");
    if (jobs < 1)
        jobs = 1;
    if (jobs > MAX_JOBS)
        jobs = MAX_JOBS;

    char *dir = NULL;
    warm_state s;
    memset(&s, 0, sizeof s);
    pthread_mutex_init(&s.lock, NULL);
    int code = tool_resolve_dir(CMD, p.dir, &dir);
    if (!code)
        code = tool_input_bound(CMD, dir, max, &m.max_size);
    if (!code)
        code = warm_read_manifest(&m, arch);
    if (code)
        goto done;
    if ((code = tool_open_cache(CMD, dir, TOOL_CREATE, max, &s.cache)))
        goto done;
    s.m = &m;
    tool_progress_start(&s.bar);
    double t = now_ms();
    draw_progress(&s);
    run_workers(&s, (unsigned)jobs);
    tool_progress_end(&s.bar);
    double ms = now_ms() - t;
    if (json)
        print_json(&s, dir, arch, ms);
    else
        print_text(&s, dir, arch, ms);
    code = s.broken ? EXIT_FAILED : s.failed ? EXIT_NO : EXIT_OK;
done:
    progcache_close(s.cache);
    pthread_mutex_destroy(&s.lock);
    for (size_t i = 0; i < m.len; i++)
        warm_free_program(&m.items[i]);
    free(m.items);
    free(dir);
    return code;
}

/* progcache warm: compile every program of a manifest into the cache, in
 * parallel, so that a cluster starts with a warm cache. The keys are the
 * ones progcache_compile_or_load (and cuda.core) derive, so a program that
 * later asks for the same compile gets a hit. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "progcache/warm.h"
#include "tool_warm.h"

#define CMD "warm"
#define MAX_JOBS 256

static const char usage_text[] =
    "usage: progcache warm [-a sm_XY[,sm_XY...]] [-d DIR] [-j N] [--json]\n"
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
    "  -a, --arch sm_XY[,sm_XY...]  compile each program for each architecture\n"
    "                 listed (sm_80,sm_90,sm_100: three compiles a program, in one\n"
    "                 pass), putting -arch=sm_XY first among its NVRTC options,\n"
    "                 unless the line gives its own -arch (then once, as given);\n"
    "                 may be given more than once\n"
    "  -d, --dir DIR  the cache directory (default: $PROGCACHE_DIR, else cuda.core's);\n"
    "                 created if missing; its size cap (the setting max_size) applies\n"
    "  -j, --jobs N   run N compiles at once (default: the number of CPUs)\n"
    "  --json         print one JSON object with every program's key and outcome\n"
    "  --max-artifact-size SIZE  the largest manifest, source file or compiled\n"
    "                 program accepted (default: the setting max_artifact_size, 1G)\n"
    "  -q, --quiet    no progress bar\n"
    "  -h, --help     this text\n"
    "\n"
    "On a terminal a progress bar is drawn on standard error. At the end each\n"
    "compile is printed as 'STATUS KEY MANIFEST:LINE SOURCE' (STATUS: compiled,\n"
    "cached or failed; with several architectures the line ends with the\n"
    "architecture) with a summary, one per architecture, and why each failure\n"
    "failed.\n"
    "A line whose source file cannot be read is said and skipped; the others are\n"
    "compiled.\n"
    "Exit status: 0 every program is in the cache; 1 a program did not compile (or\n"
    "its key cannot be derived safely), a line was skipped, or the size cap\n"
    "evicted warmed programs again (one line says how many remain); 2 bad usage or a\n"
    "malformed manifest; 3 the cache could not be used or a program could not be\n"
    "stored, or no source file can be read.\n";


/* ---- compiling ---------------------------------------------------------------- */

/* One compile's outcome: row program * slots + arch. */
typedef struct warm_row {
    outcome result;
    int program_error; /* FAILED because of the program (did not compile) */
    const char *arch;  /* NULL: compiled as given */
    char key_hex[2 * PROGCACHE_KEY_SIZE + 1];
    double ms;
    char *error;
} warm_row;

typedef struct arch_count {
    size_t compiled, cached, failed;
} arch_count;

typedef struct warm_state {
    manifest *m;
    const char **archs;
    size_t num_archs, slots; /* slots: num_archs, or 1 */
    warm_row *rows;
    arch_count *per_arch; /* num_archs + 1: the last for programs with their own -arch */
    progcache_warm_result total;
    tool_progress bar;
    /* Eviction during the warm (a cap smaller than what was warmed): the
     * passes summed, and how many warmed entries are still there after. */
    uint64_t evicted, evicted_bytes;
    size_t warmed, remaining;
} warm_state;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int on_item(void *ctx, const progcache_warm_item *it, uint64_t done, uint64_t total)
{
    warm_state *s = ctx;
    warm_row *r = &s->rows[it->program * s->slots + (it->arch_name ? it->arch : 0)];
    arch_count *c = &s->per_arch[it->arch_name ? it->arch : s->num_archs];
    r->arch = it->arch_name;
    r->ms = it->ms;
    if (it->has_key)
        progcache_key_hex(r->key_hex, it->key, sizeof it->key);
    if (it->rc) {
        r->result = FAILED;
        r->program_error = it->rc == PROGCACHE_ECOMPILE || it->rc == PROGCACHE_EUNSAFEKEY;
        r->error = strdup(it->message);
        c->failed++;
    } else if (it->status == PROGCACHE_STATUS_HIT) {
        r->result = CACHED;
        c->cached++;
    } else {
        r->result = COMPILED;
        c->compiled++;
    }
    s->total.compiled += r->result == COMPILED;
    s->total.cached += r->result == CACHED;
    s->total.failed += r->result == FAILED;
    char note[96];
    snprintf(note, sizeof note, "compiled %llu, cached %llu, failed %llu",
             (unsigned long long)s->total.compiled, (unsigned long long)s->total.cached,
             (unsigned long long)s->total.failed);
    tool_progress_note(&s->bar, s->num_archs > 1 ? "compiles" : "programs", done, total, note);
    return 0;
}

static int run_warm(warm_state *s, progcache *cache, unsigned jobs)
{
    manifest *m = s->m;
    progcache_program *progs = calloc(m->len, sizeof *progs);
    if (!progs)
        return tool_error(CMD, "out of memory");
    for (size_t i = 0; i < m->len; i++) {
        program *p = &m->items[i];
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
        progs[i] = prog;
    }
    progcache_warm_options o = PROGCACHE_WARM_OPTIONS_INIT;
    o.archs = s->archs;
    o.num_archs = s->num_archs;
    o.jobs = jobs;
    o.on_item = on_item;
    o.ctx = s;
    int rc = progcache_warm(NULL, cache, progs, m->len, &o);
    free(progs);
    return rc ? tool_lib_error(CMD, EXIT_USAGE, "cannot warm") : EXIT_OK;
}

/* After a warm that evicted: how many of the entries it compiled or found are
 * still in the directory (a summary that said "19 compiled" when 2 remain
 * misled). Looked up without reading them (progcache_store_exists). */
static int count_remaining(warm_state *s, const char *dir)
{
    tool_folded_evictions(&s->evicted, &s->evicted_bytes);
    if (!s->evicted)
        return EXIT_OK;
    progcache_file *f = NULL;
    int code = tool_open_file(CMD, dir, TOOL_READ, 0, &f);
    for (size_t i = 0; !code && i < s->m->len * s->slots; i++) {
        const warm_row *r = &s->rows[i];
        size_t len = 0;
        unsigned char *key = NULL;
        if ((r->result != COMPILED && r->result != CACHED) ||
            !(key = tool_decode_hex(r->key_hex, &len)))
            continue;
        s->warmed++;
        s->remaining += progcache_store_exists(progcache_file_store(f), key, len) == 0;
        free(key);
    }
    progcache_file_close(f);
    return code;
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
    printf(", \"compiled\": %llu, \"cached\": %llu, \"failed\": %llu, \"skipped\": %zu, "
           "\"evicted\": %llu, \"remaining\": ",
           (unsigned long long)s->total.compiled, (unsigned long long)s->total.cached,
           (unsigned long long)s->total.failed, s->m->skipped, (unsigned long long)s->evicted);
    if (s->evicted)
        printf("%zu", s->remaining);
    else
        printf("null");
    printf(", \"ms\": %.1f, \"archs\": [", ms);
    for (size_t a = 0; a < s->num_archs; a++) {
        const arch_count *c = &s->per_arch[a];
        printf("%s{\"arch\": ", a ? ", " : "");
        tool_json_string(stdout, s->archs[a]);
        printf(", \"compiled\": %zu, \"cached\": %zu, \"failed\": %zu}", c->compiled, c->cached,
               c->failed);
    }
    printf("], \"programs\": [");
    int first = 1;
    for (size_t i = 0; i < s->m->len * s->slots; i++) {
        const program *p = &s->m->items[i / s->slots];
        const warm_row *r = &s->rows[i];
        if (r->result == PENDING)
            continue;
        printf("%s\n  {\"line\": %d, \"source\": ", first ? "" : ",", p->line);
        first = 0;
        tool_json_string(stdout, p->source_arg);
        printf(", \"target\": \"%s\", \"arch\": ", progcache_target_name(p->target));
        if (r->arch)
            tool_json_string(stdout, r->arch);
        else
            printf("null");
        printf(", \"status\": \"%s\", \"key\": ", outcome_name(r->result));
        if (r->key_hex[0])
            tool_json_string(stdout, r->key_hex);
        else
            printf("null");
        printf(", \"ms\": %.1f, \"options\": [", r->ms);
        if (r->arch)
            printf("\"-arch=%s\"%s", r->arch, p->num_options ? ", " : "");
        for (size_t k = 0; k < p->num_options; k++) {
            printf("%s", k ? ", " : "");
            tool_json_string(stdout, p->options[k]);
        }
        printf("], \"error\": ");
        if (r->error)
            tool_json_string(stdout, r->error);
        else
            printf("null");
        printf("}");
    }
    printf("\n]}\n");
}

static void print_text(const warm_state *s, const char *dir, const char *arch, double ms)
{
    size_t compiles = 0;
    for (size_t i = 0; i < s->m->len * s->slots; i++) {
        const program *p = &s->m->items[i / s->slots];
        const warm_row *r = &s->rows[i];
        if (r->result == PENDING)
            continue;
        compiles++;
        printf("%-8s %s %s:%d %s%s%s\n", outcome_name(r->result),
               r->key_hex[0] ? r->key_hex : "-", s->m->path, p->line, p->source_arg,
               s->num_archs > 1 ? " " : "", s->num_archs > 1 ? (r->arch ? r->arch : "own-arch")
                                                            : "");
    }
    for (size_t a = 0; s->num_archs > 1 && a <= s->num_archs; a++) {
        const arch_count *c = &s->per_arch[a];
        if (a == s->num_archs && !c->compiled && !c->cached && !c->failed)
            break;
        printf("  %s: %zu compiled, %zu already cached, %zu failed\n",
               a < s->num_archs ? s->archs[a] : "own -arch", c->compiled, c->cached, c->failed);
    }
    printf("warmed %s%s%s: %llu compiled, %llu already cached, %llu failed (", dir,
           arch ? " for " : "", arch ? arch : "", (unsigned long long)s->total.compiled,
           (unsigned long long)s->total.cached, (unsigned long long)s->total.failed);
    if (s->num_archs > 1)
        printf("%zu compiles of ", compiles);
    printf("%zu programs in %.1f s)", s->m->len, ms / 1000);
    if (s->m->skipped)
        printf("; %zu manifest line%s skipped (source file not read)", s->m->skipped,
               s->m->skipped == 1 ? "" : "s");
    putchar('\n');
    if (s->evicted) {
        char size[64];
        tool_format_size_long(size, sizeof size, s->evicted_bytes);
        printf("the cap evicted %llu %s (%s) meanwhile: %zu of the %zu warmed remain in the "
               "cache (raise max_size: 'progcache config max_size SIZE')\n",
               (unsigned long long)s->evicted, tool_entries(s->evicted), size, s->remaining,
               s->warmed);
    }
    for (size_t i = 0; i < s->m->len * s->slots; i++) {
        const program *p = &s->m->items[i / s->slots];
        const warm_row *r = &s->rows[i];
        if (r->result == FAILED)
            fprintf(stderr, "progcache warm: %s:%d %s%s%s failed: %s\n", s->m->path, p->line,
                    p->source_arg, r->arch ? " for " : "", r->arch ? r->arch : "",
                    r->error ? r->error : "(no message)");
    }
}

/* Each --arch value: one architecture or a comma-separated list of them,
 * added to s->archs. EXIT_OK or a usage error naming the bad one. */
static int add_archs(warm_state *s, char **joined, const char *value)
{
    char *copy = strdup(value);
    if (!copy)
        return tool_error(CMD, "out of memory");
    int code = EXIT_OK;
    char *save = NULL;
    if (!*value || value[strlen(value) - 1] == ',' || *value == ',' || strstr(value, ",,"))
        code = tool_usage_error(CMD, "--arch \"%s\": an empty architecture in the list", value);
    for (char *a = strtok_r(copy, ",", &save); a && !code; a = strtok_r(NULL, ",", &save)) {
        if (!progcache_arch_valid(a)) {
            code = tool_usage_error(CMD,
                                    "--arch \"%s\": unknown architecture \"%s\"; give names "
                                    "such as sm_80, sm_90a or compute_90, separated by commas",
                                    value, a);
            break;
        }
        for (size_t k = 0; k < s->num_archs; k++)
            if (!strcmp(s->archs[k], a))
                code = tool_usage_error(CMD, "--arch: %s is listed twice", a);
        const char **archs = code ? NULL : realloc(s->archs, (s->num_archs + 1) * sizeof *archs);
        if (!code && (!archs || !(archs[s->num_archs] = strdup(a))))
            code = tool_error(CMD, "out of memory");
        if (archs)
            s->archs = archs;
        if (!code)
            s->num_archs++;
    }
    free(copy);
    size_t len = *joined ? strlen(*joined) : 0;
    char *j = code ? NULL : realloc(*joined, len + strlen(value) + 2);
    if (j) {
        snprintf(j + len, strlen(value) + 2, "%s%s", len ? "," : "", value);
        *joined = j;
    }
    return code;
}

static void free_state(warm_state *s)
{
    for (size_t i = 0; s->rows && i < s->m->len * s->slots; i++)
        free(s->rows[i].error);
    free(s->rows);
    free(s->per_arch);
    for (size_t a = 0; a < s->num_archs; a++)
        free((char *)s->archs[a]);
    free(s->archs);
}

int cmd_warm(int argc, char **argv)
{
    static const tool_option options[] = {
        {"arch", 'a', 1}, {"jobs", 'j', 1}, TOOL_MAX_ARTIFACT_SIZE_OPTION, {NULL, 0, 0}};
    char *arch = NULL; /* the --arch values, joined: for the summary */
    uint64_t max = 0;
    long jobs = sysconf(_SC_NPROCESSORS_ONLN);
    manifest m = {NULL, 0, NULL, 0, 0};
    warm_state s;
    memset(&s, 0, sizeof s);
    s.m = &m;
    tool_parser p;
    tool_parser_init(&p, CMD, usage_text, argc, argv, options, TOOL_JSON);
    int code = EXIT_OK;
    for (int c; !code && (c = tool_next(&p)) != TOOL_END;) {
        const char *v = p.arg;
        char *end;
        switch (c) {
        case TOOL_EXIT: code = p.code; goto done;
        case 'a': code = add_archs(&s, &arch, v); break;
        case 'j':
            errno = 0;
            jobs = strtol(v, &end, 10);
            if (end == v || *end || errno || jobs < 1 || jobs > MAX_JOBS)
                code = tool_usage_error(CMD, "--jobs \"%s\": give a number from 1 to %d", v,
                                        MAX_JOBS);
            break;
        case TOOL_OPT_MAX_ARTIFACT_SIZE:
            if (tool_max_size_value(CMD, v, &max))
                code = EXIT_USAGE;
            break;
        default:
            if (m.path)
                code = tool_usage_error(CMD, "more than one MANIFEST (\"%s\" and \"%s\")",
                                        m.path, v);
            m.path = v;
        }
    }
    if (code)
        goto done;
    int json = p.json;
    if (!m.path) {
        code = tool_usage_error(CMD, "give a MANIFEST (run 'progcache warm --help')");
        goto done;
    }
    if (jobs < 1)
        jobs = 1;

    char *dir = NULL;
    progcache *cache = NULL;
    code = tool_resolve_dir(CMD, p.dir, &dir);
    if (!code)
        code = tool_input_bound(CMD, dir, max, &m.max_size);
    if (!code)
        code = warm_read_manifest(&m);
    s.slots = s.num_archs ? s.num_archs : 1;
    if (!code && (!(s.rows = calloc(m.len * s.slots, sizeof *s.rows)) ||
                  !(s.per_arch = calloc(s.num_archs + 1, sizeof *s.per_arch))))
        code = tool_error(CMD, "out of memory");
    tool_fold_evictions(); /* one line at the end, not one per pass */
    if (!code)
        code = tool_open_cache(CMD, dir, TOOL_CREATE, max, &cache);
    if (!code) {
        tool_progress_start(&s.bar);
        double t = now_ms();
        code = run_warm(&s, cache, (unsigned)jobs);
        tool_progress_end(&s.bar);
        double ms = now_ms() - t;
        progcache_close(cache); /* its puts done before what remains is counted */
        cache = NULL;
        if (!code)
            code = count_remaining(&s, dir);
        if (!code && json)
            print_json(&s, dir, arch, ms);
        else if (!code)
            print_text(&s, dir, arch, ms);
    }
    if (!code) {
        int broken = 0;
        for (size_t i = 0; i < m.len * s.slots; i++)
            broken |= s.rows[i].result == FAILED && !s.rows[i].program_error;
        /* 0 says every program is in the cache: not so when the cap
         * evicted some of them again */
        code = broken ? EXIT_FAILED
               : s.total.failed || m.skipped || s.remaining < s.warmed ? EXIT_NO
                                                                         : EXIT_OK;
    }
    progcache_close(cache);
    free(dir);
done:
    free_state(&s);
    for (size_t i = 0; i < m.len; i++)
        warm_free_program(&m.items[i]);
    free(m.items);
    free(arch);
    return code;
}

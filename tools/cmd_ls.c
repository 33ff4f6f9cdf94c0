/* progcache ls: one line per entry with what is in it. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "tool.h"

#define CMD "ls"

static const char usage_text[] =
    "usage: progcache ls [-d DIR | --remote URL] [-s name|size|age|lru] [--json]\n"
    "\n"
    "List the entries of a cache directory (or of a remote store), one per line:\n"
    "  NAME  SIZE  LAST-USE  KIND  ARCH  KERNELS\n"
    "NAME is the entry's file name (the 64 hex digits of SHA-256 of its key); SIZE\n"
    "in bytes (K, M, G: KiB, MiB, GiB); LAST-USE the local time of its last hit\n"
    "(atime); KIND is CUBIN, PTX, LTO-IR, fatbin or unknown; ARCH the target\n"
    "architecture (sm_90; '-' when unknown); KERNELS the kernel names, comma-\n"
    "separated ('-' when none); a first line names the columns (--json for\n"
    "scripts). An entry that records the lowered names of its\n"
    "name expressions goes on with 'names: EXPR -> LOWERED; ...'. A header manifest\n"
    "(what a compile that reads headers read) has KIND manifest. A damaged entry\n"
    "ends with '(bad: REASON)', one of no known kind with '(unknown, kept: REASON)'\n"
    "as verify reports it.\n"
    "\n"
    "Without --sort (or with --sort name) entries are printed in name order as\n"
    "they are read, the first at once at any size, in memory independent of the\n"
    "number of entries (a remote store: in the order it lists them). Another\n"
    "sort reads every entry first, sorting runs of 4096 rows in memory and\n"
    "merging them through unnamed temporary files in $TMPDIR (else /tmp), so that\n"
    "its memory does not grow with the number of entries either; they go with\n"
    "the process, however it ends.\n"
    "\n"
    "options:\n"
    "  -d, --dir DIR   the cache directory (default: $PROGCACHE_DIR, else\n"
    "               cuda.core's)\n"
    "  --remote URL list the store URL names instead (redis://HOST:PORT/DB,\n"
    "               unix:PATH, a registered tier): every value is read, as a\n"
    "               lookup reads it, to show what it holds; LAST-USE is '-'\n"
    "  -s, --sort KEY  name (default), size (largest first), age (oldest written\n"
    "               first) or lru (least recently used first: eviction order)\n"
    "  --json       print one JSON object instead: {\"schema\": 1, \"dir\": ...,\n"
    "               \"entries\": [one object per entry]}\n"
    "  -h, --help   this text\n"
    "\n"
    "Exit status: 0 listed; 2 bad usage; 3 the directory or store cannot be read\n"
    "(or the store cannot be listed).\n";

typedef struct row {
    char name[65];
    uint64_t size;
    int64_t atime_ns, mtime_ns;
    progcache_kind kind;
    int valid;
    char *reason;
    char *arch;
    char **kernels;
    size_t num_kernels;
    char **names; /* tagged expression, lowered name, tagged expression, ... */
    size_t num_names;
} row;

typedef struct rows {
    row *items;
    size_t len, cap;
} rows;

typedef enum sort_key { SORT_NAME, SORT_SIZE, SORT_AGE, SORT_LRU } sort_key;

/* The lowered names kept with the entry, if any. A record that is not
 * well formed shows as none. */
static int collect_names(row *r, const progcache_entry_meta *meta)
{
    const unsigned char *rec;
    size_t len, pos = 0;
    const char *expr, *lowered;
    if (!meta || progcache_entry_meta_find(&rec, &len, meta, PROGCACHE_RECORD_LOWERED_NAMES))
        return 0;
    while (progcache_lowered_names_next(rec, len, &pos, &expr, &lowered) == 1) {
        char **names = realloc(r->names, (r->num_names + 2) * sizeof *names);
        if (!names)
            return -1;
        r->names = names;
        if (!(names[r->num_names] = strdup(expr)))
            return -1;
        if (!(names[r->num_names + 1] = strdup(lowered))) {
            free(names[r->num_names]);
            return -1;
        }
        r->num_names += 2;
    }
    return 0;
}

static int collect(void *ctx, const progcache_entry *e)
{
    rows *list = ctx;
    if (list->len == list->cap) {
        size_t cap = list->cap ? list->cap * 2 : 64;
        row *items = realloc(list->items, cap * sizeof *items);
        if (!items)
            return -1;
        list->items = items;
        list->cap = cap;
    }
    row *r = &list->items[list->len];
    memset(r, 0, sizeof *r);
    memcpy(r->name, e->name, sizeof r->name);
    r->size = e->size;
    r->atime_ns = e->atime_ns;
    r->mtime_ns = e->mtime_ns;
    const progcache_artifact_info *a = e->artifact;
    r->reason = strdup(e->error ? e->error : a ? a->reason : "");
    r->arch = strdup(a ? a->arch : "");
    if (!r->reason || !r->arch)
        return -1;
    if (a) {
        r->kind = a->kind;
        r->valid = a->valid && !e->error;
        r->kernels = calloc(a->num_kernels + 1, sizeof *r->kernels);
        if (!r->kernels)
            return -1;
        for (size_t i = 0; i < a->num_kernels; i++) {
            if (!(r->kernels[i] = strdup(progcache_artifact_kernel(a, i))))
                return -1;
            r->num_kernels++;
        }
    }
    list->len++;
    return collect_names(r, e->meta);
}

/* Free what the rows hold; the array is kept for the next ones. */
static void clear_rows(rows *list)
{
    for (size_t i = 0; i < list->len; i++) {
        row *r = &list->items[i];
        free(r->reason);
        free(r->arch);
        for (size_t k = 0; k < r->num_kernels; k++)
            free(r->kernels[k]);
        free(r->kernels);
        for (size_t k = 0; k < r->num_names; k++)
            free(r->names[k]);
        free(r->names);
    }
    list->len = 0;
}

static void free_rows(rows *list)
{
    clear_rows(list);
    free(list->items);
}

static void print_header(void)
{
    printf("%-64s  %6s  %-19s  %-8s %-8s %s\n", "NAME", "SIZE", "LAST-USE", "KIND", "ARCH",
           "KERNELS");
}

static void print_row_text(FILE *out, const row *r)
{
    char size[24], when[32];
    tool_format_size(size, sizeof size, r->size);
    if (r->atime_ns)
        tool_format_time(when, sizeof when, r->atime_ns / 1000000000);
    else
        snprintf(when, sizeof when, "-"); /* not known (a remote store) */
    fprintf(out, "%s  %6s  %-19s  %-8s %-8s ", r->name, size, when, progcache_kind_name(r->kind),
           r->arch[0] ? r->arch : "-");
    if (!r->num_kernels)
        fputs("-", out);
    for (size_t k = 0; k < r->num_kernels; k++)
        fprintf(out, "%s%s", k ? "," : "", r->kernels[k]);
    /* An "s:" expression is printed as written; "b:" keeps its tag. */
    for (size_t k = 0; k < r->num_names; k += 2)
        fprintf(out, "%s%s -> %s", k ? "; " : "  names: ",
               r->names[k][0] == 's' ? r->names[k] + 2 : r->names[k], r->names[k + 1]);
    /* verify's words: an entry of no known kind is kept, not bad */
    if (!r->valid)
        fprintf(out, "  (%s: %s)", r->kind == PROGCACHE_KIND_UNKNOWN ? "unknown, kept" : "bad",
               r->reason);
    fputc('\n', out);
}

static void print_json_head(const char *dir, const char *remote)
{
    tool_json_begin(stdout);
    printf(", \"dir\": ");
    if (dir)
        tool_json_string(stdout, dir);
    else
        printf("null, \"remote\": ");
    if (!dir)
        tool_json_string(stdout, remote);
    printf(", \"entries\": [");
}

static void print_row_json(FILE *out, const row *r)
{
    fprintf(out, "\n  {\"name\": ");
    tool_json_string(out, r->name);
    /* Times in whole milliseconds, integers JavaScript reads exactly;
     * the nanoseconds, which it cannot, as decimal strings. */
    fprintf(out, ", \"size\": %llu, \"atime_ms\": %lld, \"mtime_ms\": %lld, "
           "\"atime_ns\": \"%lld\", \"mtime_ns\": \"%lld\", \"kind\": ",
           (unsigned long long)r->size, (long long)(r->atime_ns / 1000000),
           (long long)(r->mtime_ns / 1000000), (long long)r->atime_ns, (long long)r->mtime_ns);
    tool_json_string(out, progcache_kind_name(r->kind));
    fprintf(out, ", \"valid\": %s, \"reason\": ", r->valid ? "true" : "false");
    tool_json_string(out, r->reason);
    fprintf(out, ", \"arch\": ");
    tool_json_string(out, r->arch);
    fprintf(out, ", \"kernels\": [");
    for (size_t k = 0; k < r->num_kernels; k++) {
        if (k)
            fprintf(out, ", ");
        tool_json_string(out, r->kernels[k]);
    }
    fprintf(out, "], \"names\": [");
    for (size_t k = 0; k < r->num_names; k += 2) {
        fprintf(out, "%s{\"expression\": ", k ? ", " : "");
        tool_json_string(out, r->names[k] + 2);
        fprintf(out, ", \"bytes\": %s, \"lowered\": ", r->names[k][0] == 'b' ? "true" : "false");
        tool_json_string(out, r->names[k + 1]);
        fprintf(out, "}");
    }
    fprintf(out, "]}");
}

/* ---- sorted listings in bounded memory (issue 32) ---------------------- */

/* A row as printed, with what it sorts by: key, then name. */
typedef struct sorted {
    int64_t key;
    char name[65];
    uint32_t len;
    char *text;
} sorted;

#define SORT_RUN_ROWS 4096 /* rows held in memory at most */
#define SORT_FAN_IN 16     /* runs merged at once */
#define SORT_OPEN_RUNS 64  /* runs kept at once: one more, and the oldest are merged */

/* Runs of sorted rows in unnamed files (a name would outlive a process
 * ended by a signal), oldest first; dir is where they are made. */
typedef struct sorter {
    sorted *rows;
    size_t len, run_rows;
    char dir[PATH_MAX];
    FILE *runs[SORT_OPEN_RUNS];
    unsigned nruns;
    unsigned max_runs, fan_in; /* within the process's open-file limit */
} sorter;

static int by_key(const void *a, const void *b)
{
    const sorted *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* A new run, read-write, with no name: O_TMPFILE, else (a file system
 * without it) a private name removed at once, with the signals that end
 * the tool held off between the two so that none leaves the name behind. */
static FILE *run_new(sorter *so)
{
    if (!so->dir[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(so->dir, sizeof so->dir, "%s", t && *t ? t : "/tmp");
    }
    int fd = open(so->dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
        char path[PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/progcache-ls-XXXXXX", so->dir);
        sigset_t all, old;
        sigfillset(&all);
        sigprocmask(SIG_BLOCK, &all, &old);
        fd = mkostemp(path, O_CLOEXEC); /* 0600: private */
        if (fd >= 0)
            (void)unlink(path);
        sigprocmask(SIG_SETMASK, &old, NULL);
    }
    FILE *f = fd >= 0 ? fdopen(fd, "w+b") : NULL;
    if (fd >= 0 && !f)
        close(fd);
    return f;
}

/* f written: kept as the newest run, read from its start. */
static int run_keep(sorter *so, FILE *f)
{
    if (fflush(f) != 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return -1;
    }
    so->runs[so->nruns++] = f;
    return 0;
}

static int put_sorted(FILE *f, const sorted *r)
{
    return fwrite(&r->key, sizeof r->key, 1, f) == 1 && fwrite(r->name, 65, 1, f) == 1 &&
                   fwrite(&r->len, sizeof r->len, 1, f) == 1 &&
                   fwrite(r->text, 1, r->len, f) == r->len
               ? 0
               : -1;
}

/* 1 read, 0 at the end, -1 failed. */
static int get_sorted(FILE *f, sorted *r)
{
    free(r->text);
    r->text = NULL;
    if (fread(&r->key, sizeof r->key, 1, f) != 1)
        return ferror(f) ? -1 : 0;
    if (fread(r->name, 65, 1, f) != 1 || fread(&r->len, sizeof r->len, 1, f) != 1 ||
        !(r->text = malloc(r->len + 1)) || fread(r->text, 1, r->len, f) != r->len)
        return -1;
    r->text[r->len] = '\0';
    r->name[64] = '\0';
    return 1;
}

typedef struct lister lister;
static void emit(lister *l, const char *text);
static int merge(sorter *so, unsigned n, lister *l);

/* The rows in memory, sorted, as the newest run (the oldest merged first
 * when SORT_OPEN_RUNS are kept: the open files stay bounded). */
static int flush_run(sorter *so)
{
    if (so->nruns >= so->max_runs && merge(so, so->fan_in, NULL) != 0)
        return -1;
    qsort(so->rows, so->len, sizeof *so->rows, by_key);
    FILE *f = run_new(so);
    int rc = f ? 0 : -1;
    for (size_t i = 0; i < so->len; i++) {
        if (!rc)
            rc = put_sorted(f, &so->rows[i]);
        free(so->rows[i].text);
    }
    so->len = 0;
    if (rc) {
        if (f)
            fclose(f);
        return -1;
    }
    return run_keep(so, f);
}

/* Merge the n oldest runs into a new newest run, or (l) print them. */
static int merge(sorter *so, unsigned n, lister *l)
{
    FILE **in = so->runs;
    sorted head[SORT_FAN_IN];
    memset(head, 0, sizeof head);
    int live[SORT_FAN_IN] = {0}, rc = 0;
    FILE *out = l ? NULL : run_new(so);
    if (!l && !out)
        rc = -1;
    for (unsigned i = 0; i < n && !rc; i++)
        if ((live[i] = get_sorted(in[i], &head[i])) < 0)
            rc = -1;
    while (!rc) {
        int min = -1;
        for (unsigned i = 0; i < n; i++)
            if (live[i] == 1 && (min < 0 || by_key(&head[i], &head[min]) < 0))
                min = (int)i;
        if (min < 0)
            break;
        if (l)
            emit(l, head[min].text);
        else if (put_sorted(out, &head[min]) != 0)
            rc = -1;
        if ((live[min] = get_sorted(in[min], &head[min])) < 0)
            rc = -1;
    }
    for (unsigned i = 0; i < n; i++) {
        free(head[i].text);
        fclose(in[i]); /* its space goes with it */
    }
    so->nruns -= n;
    memmove(so->runs, so->runs + n, so->nruns * sizeof *so->runs);
    if (out && (rc || run_keep(so, out) != 0)) {
        if (rc)
            fclose(out);
        rc = -1;
    }
    return rc;
}

/* Runs kept and merged at once within the open-file limit: a merge holds
 * its runs and the new one, beside the cache's own files and stdio (a
 * limit of 64 left a listing of many runs failing with EMFILE). */
static void sorter_limits(sorter *so)
{
    struct rlimit rl;
    rlim_t spare = 8;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        if (rl.rlim_cur == RLIM_INFINITY)
            spare = SORT_OPEN_RUNS;
        else if (rl.rlim_cur > 32)
            spare = (rl.rlim_cur - 24) / 2;
    }
    so->max_runs = spare < SORT_OPEN_RUNS ? (unsigned)spare : SORT_OPEN_RUNS;
    if (so->max_runs < 2)
        so->max_runs = 2;
    so->fan_in = so->max_runs < SORT_FAN_IN ? so->max_runs : SORT_FAN_IN;
}

static void sorter_free(sorter *so)
{
    for (size_t i = 0; i < so->len; i++)
        free(so->rows[i].text);
    free(so->rows);
    for (unsigned i = 0; i < so->nruns; i++)
        fclose(so->runs[i]);
}

/* The walk's state: without a sort, each row is printed as it comes and
 * freed (issue 32: the first line at once, memory independent of the
 * number of entries); with one, rows go through the sorter. */
struct lister {
    rows list;
    int json;
    sort_key sort;
    size_t printed;
    sorter so;
};

static void emit(lister *l, const char *text)
{
    if (l->json)
        fputs(l->printed ? "," : "", stdout);
    else if (!l->printed) /* the columns named, piped or not (an empty cache: nothing) */
        print_header();
    fputs(text, stdout);
    l->printed++;
}

static int on_entry(void *ctx, const progcache_entry *e)
{
    lister *l = ctx;
    int rc = collect(&l->list, e);
    if (rc)
        return rc;
    const row *r = &l->list.items[0];
    sorted s = {0, "", 0, NULL};
    size_t len = 0;
    FILE *f = open_memstream(&s.text, &len);
    if (!f)
        return -1;
    if (l->json)
        print_row_json(f, r);
    else
        print_row_text(f, r);
    if (fclose(f) != 0 || len > UINT32_MAX) {
        free(s.text);
        return -1;
    }
    s.len = (uint32_t)len;
    memcpy(s.name, r->name, sizeof s.name);
    s.key = l->sort == SORT_SIZE  ? -(int64_t)r->size
            : l->sort == SORT_AGE ? r->mtime_ns
                                  : r->atime_ns;
    clear_rows(&l->list);
    if (l->sort == SORT_NAME) {
        emit(l, s.text);
        free(s.text);
        return ferror(stdout) ? -2 : 0; /* the reader went away: stop */
    }
    sorter *so = &l->so;
    if (!so->rows && !(so->rows = malloc(so->run_rows * sizeof *so->rows))) {
        free(s.text);
        return -1;
    }
    so->rows[so->len++] = s;
    return so->len == so->run_rows && flush_run(so) != 0 ? -3 : 0;
}

/* Print what the sorter holds, in order: in memory when it all fitted,
 * else merged, SORT_FAN_IN runs at a time, until one pass prints. */
static int sorted_print(lister *l)
{
    sorter *so = &l->so;
    if (!so->nruns) {
        qsort(so->rows, so->len, sizeof *so->rows, by_key);
        for (size_t i = 0; i < so->len; i++)
            emit(l, so->rows[i].text);
        return 0;
    }
    if (so->len && flush_run(so) != 0)
        return -1;
    while (so->nruns > so->fan_in)
        if (merge(so, so->fan_in, NULL) != 0)
            return -1;
    return merge(so, so->nruns, l);
}

int cmd_ls(int argc, char **argv)
{
    static const tool_option options[] = {{"sort", 's', 1}, TOOL_REMOTE_OPTION, {NULL, 0, 0}};
    sort_key sort = SORT_NAME;
    const char *remote = NULL;
    tool_parser p;
    tool_parser_init(&p, CMD, usage_text, argc, argv, options, TOOL_JSON);
    for (int c; (c = tool_next(&p)) != TOOL_END;) {
        if (c == TOOL_EXIT)
            return p.code;
        if (c == TOOL_OPT_REMOTE) {
            remote = p.arg;
            continue;
        }
        if (c != 's')
            return tool_unexpected_arg(CMD, p.arg);
        const char *v = p.arg;
        if (!strcmp(v, "name"))
            sort = SORT_NAME;
        else if (!strcmp(v, "size"))
            sort = SORT_SIZE;
        else if (!strcmp(v, "age"))
            sort = SORT_AGE;
        else if (!strcmp(v, "lru"))
            sort = SORT_LRU;
        else
            return tool_usage_error(CMD, "--sort \"%s\": use name, size, age or lru", v);
    }
    int json = p.json;
    /* A reader that goes away (`ls --sort size | head`) while runs are
     * merged: said at the end (finish_stdout, exit 3), not a death by
     * SIGPIPE. */
    if (sort != SORT_NAME)
        signal(SIGPIPE, SIG_IGN);
    char *dir = NULL;
    progcache_file *file = NULL;
    progcache_store *store = NULL;
    lister l = {{NULL, 0, 0}, json, sort, 0, {NULL, 0, SORT_RUN_ROWS, "", {NULL}, 0, 0, 0}};
    /* Smaller runs, for the tests: what a million entries do, with a few. */
    const char *run_rows = getenv("PROGCACHE_LS_SORT_ROWS");
    if (run_rows && atoi(run_rows) >= 2 && atoi(run_rows) <= SORT_RUN_ROWS)
        l.so.run_rows = (size_t)atoi(run_rows);
    sorter_limits(&l.so);
    char where[1024] = "";
    unsigned int flags = PROGCACHE_ENTRIES_INSPECT | PROGCACHE_ENTRIES_RECORDS;
    if (remote && p.dir)
        return tool_usage_error(CMD, "give --dir or --remote, not both");
    int code = remote ? tool_open_remote(CMD, remote, 0, &store)
                      : tool_open_dir_file(CMD, p.dir, TOOL_READ, 0, &dir, &file);
    if (code)
        goto done;
    if (remote)
        tool_mask_url(where, sizeof where, remote);
    if (json)
        print_json_head(dir, where);
    /* Name order is the walk's own (shard by shard, sorted within each):
     * printed as it comes. */
    int rc = store ? progcache_store_foreach(store, flags, on_entry, &l)
                   : progcache_file_foreach(file, flags, on_entry, &l);
    if (rc == -1) {
        code = tool_error(CMD, "out of memory listing %s", dir ? dir : where);
        goto done;
    }
    if (rc == -2) {
        code = tool_error(CMD, "cannot write the listing");
        goto done;
    }
    if (rc == -3) {
        code = tool_error(CMD, "cannot sort the listing through temporary files in %s: %s",
                          l.so.dir[0] ? l.so.dir : "$TMPDIR", strerror(errno));
        goto done;
    }
    if (rc) {
        code = tool_lib_error(CMD, EXIT_FAILED,
                              store ? "cannot list the remote store" : "cannot list the cache");
        goto done;
    }
    if (sort != SORT_NAME && sorted_print(&l) != 0) {
        code = tool_error(CMD, "cannot sort the listing through temporary files in %s: %s",
                          l.so.dir[0] ? l.so.dir : "$TMPDIR", strerror(errno));
        goto done;
    }
    if (json)
        printf("%s]}\n", l.printed ? "\n" : "");
done:
    free_rows(&l.list);
    sorter_free(&l.so);
    progcache_file_close(file);
    progcache_store_free(store);
    free(dir);
    return code;
}

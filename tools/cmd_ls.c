/* progcache ls: one line per entry with what is in it. */
#include <stdlib.h>
#include <string.h>

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
    "sort reads every entry first.\n"
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

static int cmp_i64(int64_t a, int64_t b) { return a < b ? -1 : a > b; }

static int by_size(const void *a, const void *b)
{
    const row *x = a, *y = b;
    if (x->size != y->size)
        return x->size > y->size ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int by_age(const void *a, const void *b)
{
    const row *x = a, *y = b;
    int c = cmp_i64(x->mtime_ns, y->mtime_ns);
    return c ? c : strcmp(x->name, y->name);
}

static int by_lru(const void *a, const void *b)
{
    const row *x = a, *y = b;
    int c = cmp_i64(x->atime_ns, y->atime_ns);
    return c ? c : strcmp(x->name, y->name);
}

static void print_header(void)
{
    printf("%-64s  %6s  %-19s  %-8s %-8s %s\n", "NAME", "SIZE", "LAST-USE", "KIND", "ARCH",
           "KERNELS");
}

static void print_row_text(const row *r)
{
    char size[24], when[32];
    tool_format_size(size, sizeof size, r->size);
    if (r->atime_ns)
        tool_format_time(when, sizeof when, r->atime_ns / 1000000000);
    else
        snprintf(when, sizeof when, "-"); /* not known (a remote store) */
    printf("%s  %6s  %-19s  %-8s %-8s ", r->name, size, when, progcache_kind_name(r->kind),
           r->arch[0] ? r->arch : "-");
    if (!r->num_kernels)
        fputs("-", stdout);
    for (size_t k = 0; k < r->num_kernels; k++)
        printf("%s%s", k ? "," : "", r->kernels[k]);
    /* An "s:" expression is printed as written; "b:" keeps its tag. */
    for (size_t k = 0; k < r->num_names; k += 2)
        printf("%s%s -> %s", k ? "; " : "  names: ",
               r->names[k][0] == 's' ? r->names[k] + 2 : r->names[k], r->names[k + 1]);
    /* verify's words: an entry of no known kind is kept, not bad */
    if (!r->valid)
        printf("  (%s: %s)", r->kind == PROGCACHE_KIND_UNKNOWN ? "unknown, kept" : "bad",
               r->reason);
    putchar('\n');
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

static void print_row_json(const row *r, size_t i)
{
    printf("%s\n  {\"name\": ", i ? "," : "");
    tool_json_string(stdout, r->name);
    /* Times in whole milliseconds, integers JavaScript reads exactly;
     * the nanoseconds, which it cannot, as decimal strings. */
    printf(", \"size\": %llu, \"atime_ms\": %lld, \"mtime_ms\": %lld, "
           "\"atime_ns\": \"%lld\", \"mtime_ns\": \"%lld\", \"kind\": ",
           (unsigned long long)r->size, (long long)(r->atime_ns / 1000000),
           (long long)(r->mtime_ns / 1000000), (long long)r->atime_ns, (long long)r->mtime_ns);
    tool_json_string(stdout, progcache_kind_name(r->kind));
    printf(", \"valid\": %s, \"reason\": ", r->valid ? "true" : "false");
    tool_json_string(stdout, r->reason);
    printf(", \"arch\": ");
    tool_json_string(stdout, r->arch);
    printf(", \"kernels\": [");
    for (size_t k = 0; k < r->num_kernels; k++) {
        if (k)
            printf(", ");
        tool_json_string(stdout, r->kernels[k]);
    }
    printf("], \"names\": [");
    for (size_t k = 0; k < r->num_names; k += 2) {
        printf("%s{\"expression\": ", k ? ", " : "");
        tool_json_string(stdout, r->names[k] + 2);
        printf(", \"bytes\": %s, \"lowered\": ", r->names[k][0] == 'b' ? "true" : "false");
        tool_json_string(stdout, r->names[k + 1]);
        printf("}");
    }
    printf("]}");
}

/* The walk's state: without a sort, each row is printed as it comes and
 * freed (issue 32: the first line at once, memory independent of the
 * number of entries); with one, every row is kept and sorted. */
typedef struct lister {
    rows list;
    int stream, json;
    size_t printed;
} lister;

static void print_row(lister *l, const row *r)
{
    if (l->json) {
        print_row_json(r, l->printed);
    } else {
        if (!l->printed) /* the columns named, piped or not (an empty cache: nothing) */
            print_header();
        print_row_text(r);
    }
    l->printed++;
}

static int on_entry(void *ctx, const progcache_entry *e)
{
    lister *l = ctx;
    int rc = collect(&l->list, e);
    if (rc || !l->stream)
        return rc;
    print_row(l, &l->list.items[0]);
    clear_rows(&l->list);
    return ferror(stdout) ? -2 : 0; /* the reader went away: stop */
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
    char *dir = NULL;
    progcache_file *file = NULL;
    progcache_store *store = NULL;
    lister l = {{NULL, 0, 0}, sort == SORT_NAME, json, 0};
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
    if (rc) {
        code = tool_lib_error(CMD, EXIT_FAILED,
                              store ? "cannot list the remote store" : "cannot list the cache");
        goto done;
    }
    int (*order)(const void *, const void *) = sort == SORT_SIZE  ? by_size
                                               : sort == SORT_AGE ? by_age
                                                                  : by_lru;
    if (!l.stream && l.list.len > 1)
        qsort(l.list.items, l.list.len, sizeof *l.list.items, order);
    for (size_t i = 0; !l.stream && i < l.list.len; i++)
        print_row(&l, &l.list.items[i]);
    if (json)
        printf("%s]}\n", l.printed ? "\n" : "");
done:
    free_rows(&l.list);
    progcache_file_close(file);
    progcache_store_free(store);
    free(dir);
    return code;
}

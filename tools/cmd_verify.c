/* progcache verify: check the structure of every entry; --fix removes the
 * bad ones. */
#include <stdlib.h>
#include <string.h>

#include "tool.h"

#define CMD "verify"

static const char usage_text[] =
    "usage: progcache verify [-d DIR] [-f] [--fix-unknown] [--seal] [--json]\n"
    "       progcache verify --remote URL [--json]\n"
    "\n"
    "Check every entry of a cache directory: a CUBIN must be a whole CUDA ELF file\n"
    "(headers, tables and sections inside the file), PTX whole text with a .version\n"
    "directive and balanced braces, LTO-IR and fatbin consistent headers; an entry\n"
    "progcache stored must still match the seal recorded with it, for its own name\n"
    "(not one copied or moved from another entry). Anything else (a truncated or\n"
    "damaged file of a known kind, bytes that differ from their seal, something\n"
    "other than a regular file at an entry's path, an entry larger than the\n"
    "artifact size bound) is a problem. Each problem is printed as\n"
    "  bad NAME KIND: REASON [removed]\n"
    "An entry of no known kind that nothing shows damaged ('progcache put' and\n"
    "cuda.core store any bytes) is not a problem: it is printed as\n"
    "  unknown NAME: REASON, kept (or: REASON [removed])\n"
    "and removed only with --fix-unknown.\n"
    "A good entry without progcache's seal (written by cuda.core or another program,\n"
    "or copied without its extended attributes: cp -r, rsync without -X) is printed as\n"
    "  unsealed NAME KIND: WHAT\n"
    "and is not a problem; --seal seals this user's own.\n"
    "Files and directories that are not part of a cache (other names in entries/,\n"
    "a shard or tmp/) are printed as\n"
    "  not an entry, left alone: PATH\n"
    "and never removed. Then a summary line.\n"
    "\n"
    "options:\n"
    "  -d, --dir DIR  the cache directory (default: $PROGCACHE_DIR, else\n"
    "              cuda.core's)\n"
    "  -f, --fix   remove bad entries (only if still the file that was checked; other\n"
    "              processes may use the cache meanwhile); a directory at an entry's\n"
    "              path, an entry too large to read and files that are not entries\n"
    "              are left alone\n"
    "  --fix-unknown  also remove the entries of no known kind (implies --fix)\n"
    "  --seal      seal the entries without a seal that are this user's and whole\n"
    "              artifacts of a known kind (after a copy that lost the seals);\n"
    "              other users' are named, not sealed\n"
    "  --remote URL  check the entries of the store URL names instead (redis://...,\n"
    "              unix:..., a registered tier): each value is read as a lookup\n"
    "              reads it (for Redis: its envelope's digest, for its own name) and\n"
    "              then checked as above; a value that cannot be read is bad. --fix\n"
    "              is refused: a remote entry is removed by its key, which a listing\n"
    "              does not know\n"
    "  --json      print one JSON object instead of text\n"
    "  -q, --quiet no progress bar (drawn on a terminal)\n"
    "  -h, --help  this text\n"
    "\n"
    "Exit status: 0 every entry is good (files that are not entries do not count);\n"
    "1 problems were found (even if --fix removed them); 2 bad usage; 3 the\n"
    "directory or store cannot be read (or the store cannot be listed).\n";

typedef struct verify_out {
    int json;
    const char *dir;
    size_t problems;
    /* --json: the files that are not entries, printed after the problems
     * (each "path\0what\0", malloc'd). */
    char **foreign;
    size_t num_foreign;
    int out_of_memory;
    int remote; /* --remote: nothing can be removed */
    tool_progress bar;
    uint64_t checked, expected; /* for the bar: entries so far, of about */
    uint64_t unsealed, sealed;  /* i35: entries without a seal; sealed by --seal */
} verify_out;

/* What --seal did, or did not, to an entry without a seal. */
static const char *unsealed_what(int how)
{
    switch (how) {
    case PROGCACHE_UNSEALED_SEALED: return "sealed now";
    case PROGCACHE_UNSEALED_NOT_OWN: return "another user's: only its owner can seal it";
    case PROGCACHE_UNSEALED_UNCHECKED: return "not a whole artifact: not sealed";
    case PROGCACHE_UNSEALED_FAILED: return "sealing failed: the file system refused";
    default: return "no seal (cuda.core's or another program's, or a copy that lost its "
                    "extended attributes; --seal seals this user's own)";
    }
}

/* An entry without a seal, named (text), or kept for the JSON object's
 * "unsealed" list, which follows the problems. */
static void report_unsealed(verify_out *o, const progcache_entry *e, const char *kind)
{
    o->unsealed++;
    o->sealed += e->unsealed == PROGCACHE_UNSEALED_SEALED;
    if (o->json)
        return;
    if (o->bar.drawn) {
        fputs("\r\033[K", stderr);
        o->bar.drawn = 0;
    }
    printf("unsealed %s %s: %s\n", e->name, kind, unsealed_what(e->unsealed));
}

static int report_foreign(void *ctx, const char *path, const char *what)
{
    verify_out *o = ctx;
    const int plain = !strcmp(what, "not an entry");
    if (!o->json) {
        printf("not an entry, left alone: %s/%s%s%s%s\n", o->dir, path, plain ? "" : " (",
               plain ? "" : what, plain ? "" : ")");
        return 0;
    }
    char **grown = realloc(o->foreign, (o->num_foreign + 1) * sizeof *grown);
    size_t len = strlen(path) + strlen(what) + 3;
    char *item = grown ? malloc(len) : NULL;
    if (grown)
        o->foreign = grown;
    if (!item) {
        o->out_of_memory = 1;
        return 1;
    }
    /* path, NUL, what */
    memcpy(item, path, strlen(path) + 1);
    memcpy(item + strlen(path) + 1, what, strlen(what) + 1);
    o->foreign[o->num_foreign++] = item;
    return 0;
}

static int report(void *ctx, const progcache_entry *e)
{
    verify_out *o = ctx;
    o->checked++;
    tool_progress_note(&o->bar, "verifying", o->checked,
                       o->expected > o->checked ? o->expected : o->checked, NULL);
    const int unknown = !e->error && e->artifact && e->artifact->kind == PROGCACHE_KIND_UNKNOWN;
    if (!e->error && !unknown && e->unsealed)
        report_unsealed(o, e, progcache_kind_name(e->artifact ? e->artifact->kind
                                                              : PROGCACHE_KIND_UNKNOWN));
    if (!e->error && !unknown)
        return 0;
    if (o->bar.drawn && !o->json) { /* the verdict on a line of its own */
        fputs("\r\033[K", stderr);
        o->bar.drawn = 0;
    }
    const char *kind =
        progcache_kind_name(e->artifact ? e->artifact->kind : PROGCACHE_KIND_UNKNOWN);
    if (o->json) {
        printf("%s\n    {\"name\": ", o->problems ? "," : "");
        tool_json_string(stdout, e->name);
        printf(", \"kind\": ");
        tool_json_string(stdout, kind);
        printf(", \"reason\": ");
        tool_json_string(stdout, unknown ? e->artifact->reason : e->error);
        printf(", \"unknown\": %s, \"removed\": %s}", unknown ? "true" : "false",
               e->removed ? "true" : "false");
    } else if (unknown) {
        printf("unknown %s: %s%s\n", e->name, e->artifact->reason,
               e->removed  ? " [removed]"
               : o->remote ? ", kept"
                           : ", kept (--fix-unknown removes it)");
    } else {
        printf("bad %s %s: %s%s\n", e->name, kind, e->error, e->removed ? " [removed]" : "");
    }
    o->problems++;
    return 0;
}

/* --remote: the store's entries, each judged as progcache_file_verify
 * judges a file's (a value the store could not read, or a known kind that
 * is not whole, is bad; no known kind is "unknown", kept), through the
 * same report. */
typedef struct remote_verify {
    verify_out *o;
    uint64_t checked, bad, unknown;
} remote_verify;

static int judge_remote(void *ctx, const progcache_entry *e)
{
    remote_verify *v = ctx;
    progcache_entry copy = *e;
    const progcache_artifact_info *a = e->artifact;
    v->checked++;
    if (!e->error && a && !a->valid && a->kind != PROGCACHE_KIND_UNKNOWN)
        copy.error = a->reason;
    if (copy.error)
        v->bad++;
    else if (a && a->kind == PROGCACHE_KIND_UNKNOWN)
        v->unknown++;
    return report(v->o, &copy);
}

static int verify_remote(verify_out *o, const char *url, int json)
{
    progcache_store *store = NULL;
    char where[1024];
    tool_mask_url(where, sizeof where, url);
    int code = tool_open_remote(CMD, url, 0, &store);
    if (code)
        return code;
    remote_verify v = {o, 0, 0, 0};
    o->dir = where;
    o->remote = 1;
    if (json) {
        tool_json_begin(stdout);
        printf(", \"dir\": null, \"remote\": ");
        tool_json_string(stdout, where);
        printf(", \"problems\": [");
    }
    tool_progress_start(&o->bar);
    int rc = progcache_store_foreach(
        store, PROGCACHE_ENTRIES_INSPECT | PROGCACHE_ENTRIES_RECORDS, judge_remote, &v);
    tool_progress_end(&o->bar);
    if (json)
        printf("%s], \"checked\": %llu, \"bad\": %llu, \"removed\": 0, \"unknown\": %llu, "
               "\"unknown_removed\": 0, \"not_entries\": []}\n",
               o->problems ? "\n  " : "", (unsigned long long)v.checked,
               (unsigned long long)v.bad, (unsigned long long)v.unknown);
    if (rc)
        code = tool_lib_error(CMD, EXIT_FAILED, "cannot check the remote store");
    else if (!json)
        printf("checked %llu %s in %s: %llu bad%s\n", (unsigned long long)v.checked,
               tool_entries(v.checked), where, (unsigned long long)v.bad,
               v.unknown ? "; some of no known kind kept" : "");
    progcache_store_free(store);
    return code ? code : v.bad ? EXIT_NO : EXIT_OK;
}

int cmd_verify(int argc, char **argv)
{
    enum { OPT_FIX_UNKNOWN = 256, OPT_SEAL };
    static const tool_option options[] = {{"fix", 'f', 0}, {"fix-unknown", OPT_FIX_UNKNOWN, 0},
                                          {"seal", OPT_SEAL, 0}, TOOL_REMOTE_OPTION,
                                          {NULL, 0, 0}};
    int fix = 0, fix_unknown = 0, seal = 0;
    const char *remote = NULL;
    tool_parser p;
    tool_parser_init(&p, CMD, usage_text, argc, argv, options, TOOL_JSON);
    for (int c; (c = tool_next(&p)) != TOOL_END;) {
        if (c == TOOL_EXIT)
            return p.code;
        if (c == 'f')
            fix = 1;
        else if (c == OPT_FIX_UNKNOWN)
            fix = fix_unknown = 1;
        else if (c == OPT_SEAL)
            seal = 1;
        else if (c == TOOL_OPT_REMOTE)
            remote = p.arg;
        else
            return tool_unexpected_arg(CMD, p.arg);
    }
    int json = p.json;
    char *dir = NULL;
    progcache_file *file = NULL;
    verify_out o;
    memset(&o, 0, sizeof o);
    o.json = json;
    if (remote && seal)
        return tool_usage_error(CMD, "--seal cannot be used with --remote: a remote entry "
                                     "carries its digest in its envelope");
    if (remote && (p.dir || fix))
        return tool_usage_error(CMD, p.dir ? "give --dir or --remote, not both"
                                           : "--fix cannot be used with --remote: a remote "
                                             "entry is removed by its key, which a listing "
                                             "does not know");
    if (remote)
        return verify_remote(&o, remote, json);
    int code = tool_open_dir_file(CMD, p.dir, fix || seal ? TOOL_WRITE : TOOL_READ, 0, &dir,
                                  &file);
    if (code)
        goto done;
    o.dir = dir;
    tool_progress_start(&o.bar);
    if (o.bar.on)
        (void)progcache_store_count(&o.expected, progcache_file_store(file));
    progcache_verify_options opts = PROGCACHE_VERIFY_OPTIONS_INIT;
    opts.flags = (fix ? PROGCACHE_VERIFY_FIX : 0) |
                 (fix_unknown ? PROGCACHE_VERIFY_FIX_UNKNOWN : 0) | (seal ? PROGCACHE_VERIFY_SEAL : 0);
    opts.on_entry = report;
    opts.on_foreign = report_foreign;
    opts.ctx = &o;
    progcache_verify_result res = PROGCACHE_VERIFY_RESULT_INIT;
    if (json) {
        tool_json_begin(stdout);
        printf(", \"dir\": ");
        tool_json_string(stdout, dir);
        printf(", \"problems\": [");
    }
    int rc = progcache_file_verify(&res, file, &opts);
    tool_progress_end(&o.bar);
    if (json) {
        printf("%s], \"checked\": %llu, \"bad\": %llu, \"removed\": %llu, \"unknown\": %llu, "
               "\"unknown_removed\": %llu, \"not_entries\": [",
               o.problems ? "\n  " : "", (unsigned long long)res.checked,
               (unsigned long long)res.bad, (unsigned long long)res.removed,
               (unsigned long long)res.unknown, (unsigned long long)res.unknown_removed);
        for (size_t i = 0; i < o.num_foreign; i++) {
            printf("%s\n    {\"path\": ", i ? "," : "");
            tool_json_string(stdout, o.foreign[i]);
            printf(", \"what\": ");
            tool_json_string(stdout, o.foreign[i] + strlen(o.foreign[i]) + 1);
            printf("}");
        }
        printf("%s], \"unsealed\": %llu, \"sealed\": %llu}\n", o.num_foreign ? "\n  " : "",
               (unsigned long long)o.unsealed, (unsigned long long)o.sealed);
    }
    if (o.out_of_memory) {
        code = tool_error(CMD, "out of memory listing the files that are not entries");
        goto done;
    }
    if (rc) {
        code = tool_lib_error(CMD, EXIT_FAILED, "cannot check the cache");
        goto done;
    }
    if (!json) {
        printf("checked %llu %s in %s: %llu bad", (unsigned long long)res.checked,
               tool_entries(res.checked), dir, (unsigned long long)res.bad);
        if (fix)
            printf(", %llu removed", (unsigned long long)res.removed);
        else if (res.bad)
            printf(" (run with --fix to remove them)");
        if (res.unknown) {
            printf("; %llu of no known kind", (unsigned long long)res.unknown);
            if (fix_unknown)
                printf(", %llu of them removed", (unsigned long long)res.unknown_removed);
            else
                printf(" kept (--fix-unknown removes them)");
        }
        if (res.foreign)
            printf("; %llu files that are not entries left alone", (unsigned long long)res.foreign);
        if (o.unsealed)
            printf("; %llu without a seal%s", (unsigned long long)o.unsealed,
                   seal ? "" : " (--seal seals this user's own)");
        if (seal)
            printf("; %llu sealed", (unsigned long long)o.sealed);
        putchar('\n');
    }
    code = res.bad ? EXIT_NO : EXIT_OK;
done:
    for (size_t i = 0; i < o.num_foreign; i++)
        free(o.foreign[i]);
    free(o.foreign);
    progcache_file_close(file);
    free(dir);
    return code;
}

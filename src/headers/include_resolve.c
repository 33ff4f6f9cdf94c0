/* Every file an NVRTC compile can read, found as NVRTC 13 finds it.
 *
 * NVRTC's search, as measured on NVRTC 13.0 (docs/KEY.md, "Where NVRTC
 * looks"):
 *  - a header in memory whose name is exactly the include's name, first,
 *    for every include wherever it is (also one in a header file);
 *  - "quoted": the directory of the including file (for the source, the
 *    program name's directory: the working directory for a name without
 *    '/'; for a header in memory, its name's directory), unless
 *    --no-source-include; then each include path (-I, --include-path) in
 *    order. Not the working directory otherwise, and not the directories
 *    of the files further up the include chain;
 *  - <angled>: the include paths only (NVRTC 13 has no directories of its
 *    own: <cuda_fp16.h> needs -I to the toolkit);
 *  - an absolute name: that file;
 *  - --pre-include/-include: the working directory, then the include paths;
 *  - #include_next: the include paths after the one the includer was
 *    found in.
 * Each directive found by the scanner (include_scan.c) is resolved this
 * way, read, hashed and scanned in turn, breadth first. Where a candidate
 * is missing, the directory that would hold it is recorded: a file
 * appearing there later changes what NVRTC reads, and that directory's
 * times. Toolkit headers are not read (toolkit.c). */
#include "headers/include_resolve.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "error.h"
#include "fs.h"
#include "headers/include_paths.h"
#include "headers/include_scan.h"
#include "key/key_options.h"
#include "headers/toolkit.h"
#include "sha256.h"

/* Bounds: more headers than this, or an include path longer than
 * PATH_MAX, is refused rather than read (header_file.c bounds a header's
 * size). */
#define MAX_HEADERS 100000

/* ---- the resolver's state ---------------------------------------------------- */

/* An include found in a file, copied out of its text. */
typedef struct include_item {
    char *name;
    progcache__include_form form;
    int next, probe;
    unsigned line;
} include_item;

/* A file whose includes are still to be resolved. */
typedef struct pending {
    char *dir;   /* directory for "quoted" names: "." is the working directory */
    char *label; /* the file in messages */
    int found_at; /* index of the include path it was found in, or -1 */
    include_item *items;
    size_t num_items;
} pending;

/* A file read already, by what identifies it with its directory: the same
 * file reached through another directory resolves its own includes
 * differently, so it is scanned again there. */
typedef struct seen_file {
    uint64_t dev, ino, dir_dev, dir_ino;
} seen_file;

typedef struct resolver {
    const progcache_key_nvrtc_options *o;
    progcache__header_scan *out;
    progcache__include_paths paths;
    unsigned char *memory_seen; /* per header in memory: scanned already */
    seen_file *seen;
    size_t num_seen;
    pending *queue;
    size_t queue_len, queue_next;
    size_t files_cap, dirs_cap, seen_cap, queue_cap; /* allocated */
    int bundled_used; /* an include went to NVRTC's bundled headers */
} resolver;

static int grow(void **items, size_t *cap, size_t len, size_t size)
{
    if (len < *cap)
        return PROGCACHE_OK;
    size_t n = *cap ? *cap * 2 : 16;
    void *p = progcache__realloc(*items, n * size);
    if (!p)
        return progcache__error(PROGCACHE_ENOMEM, "out of memory listing the headers");
    *items = p;
    *cap = n;
    return PROGCACHE_OK;
}

/* Record dir (and its times) as a place where a header was looked for. */
static int add_dir(resolver *r, const char *path, const progcache__file_stat *st)
{
    progcache__header_scan *s = r->out;
    for (size_t i = 0; i < s->num_dirs; i++)
        if (!strcmp(s->dirs[i].path, path))
            return PROGCACHE_OK;
    void *items = s->dirs;
    if (grow(&items, &r->dirs_cap, s->num_dirs, sizeof *s->dirs))
        return PROGCACHE_ENOMEM;
    s->dirs = items;
    char *copy = progcache__strdup(path);
    if (!copy)
        return progcache__error(PROGCACHE_ENOMEM, "out of memory listing the headers");
    s->dirs[s->num_dirs].path = copy;
    s->dirs[s->num_dirs].st = *st;
    s->num_dirs++;
    return PROGCACHE_OK;
}

/* A candidate that is not there: record the nearest directory above it
 * that is, whose times change when the candidate (or a directory on the
 * way to it) appears. */
static int missing(resolver *r, const char *candidate)
{
    char *d = progcache__path_dir(candidate);
    if (!d)
        return progcache__error(PROGCACHE_ENOMEM, "out of memory listing the headers");
    int rc = PROGCACHE_OK;
    for (;;) {
        progcache__file_stat st;
        if (progcache__file_stat_of(&st, d) == 0) {
            rc = add_dir(r, d, &st);
            break;
        }
        if (!strcmp(d, ".") || !strcmp(d, "/"))
            break; /* the working directory or the root is gone: nothing to watch */
        char *up = progcache__path_dir(d);
        progcache__free(d);
        if (!(d = up)) {
            rc = progcache__error(PROGCACHE_ENOMEM, "out of memory listing the headers");
            break;
        }
    }
    progcache__free(d);
    return rc;
}

/* ---- files ------------------------------------------------------------------------ */

static int collect(void *ctx, const progcache__include *inc)
{
    pending *p = ctx;
    include_item *items = progcache__realloc(p->items, (p->num_items + 1) * sizeof *items);
    if (!items)
        return progcache__error(PROGCACHE_ENOMEM, "out of memory listing the includes");
    p->items = items;
    include_item *it = &items[p->num_items];
    it->name = progcache__malloc(inc->name_len + 1);
    if (!it->name)
        return progcache__error(PROGCACHE_ENOMEM, "out of memory listing the includes");
    memcpy(it->name, inc->name, inc->name_len);
    it->name[inc->name_len] = '\0';
    it->form = inc->form;
    it->next = inc->next;
    it->probe = inc->probe;
    it->line = inc->line;
    p->num_items++;
    return PROGCACHE_OK;
}

static void free_pending(pending *p)
{
    for (size_t i = 0; i < p->num_items; i++)
        progcache__free(p->items[i].name);
    progcache__free(p->items);
    progcache__free(p->dir);
    progcache__free(p->label);
}

/* Scan text for includes and queue them, to be resolved from dir. Takes
 * dir and label. */
static int queue_text(resolver *r, const char *text, size_t len, char *dir, char *label,
                      int found_at)
{
    void *items = r->queue;
    if (grow(&items, &r->queue_cap, r->queue_len, sizeof *r->queue)) {
        progcache__free(dir);
        progcache__free(label);
        return PROGCACHE_ENOMEM;
    }
    r->queue = items;
    pending *p = &r->queue[r->queue_len++];
    memset(p, 0, sizeof *p);
    p->dir = dir;
    p->label = label;
    p->found_at = found_at;
    if (!dir || !label)
        return progcache__error(PROGCACHE_ENOMEM, "out of memory listing the headers");
    return progcache__include_scan(text, len, collect, p);
}

/* The header file at path (found, regular): hash it and queue its
 * includes, unless it was read already from the same directory. */
static int read_header(resolver *r, const char *path, int found_at)
{
    progcache__header_scan *s = r->out;
    progcache__header_file f;
    memset(&f, 0, sizeof f);
    char *text = NULL, *dir = NULL;
    size_t len = 0;
    int rc = progcache__header_read(path, &f.st, f.sha256, &text, &len);
    if (rc)
        return rc;
    progcache__file_stat dst;
    if (!(dir = progcache__path_dir(path))) {
        rc = progcache__error(PROGCACHE_ENOMEM, "out of memory listing the headers");
        goto done;
    }
    if (progcache__file_stat_of(&dst, dir) != 0)
        memset(&dst, 0, sizeof dst);
    for (size_t i = 0; i < r->num_seen; i++) {
        const seen_file *x = &r->seen[i];
        if (x->dev == f.st.dev && x->ino == f.st.ino && x->dir_dev == dst.dev &&
            x->dir_ino == dst.ino)
            goto done; /* scanned already (include guards, or a cycle) */
    }
    if (s->num_files >= MAX_HEADERS) {
        rc = progcache__error(PROGCACHE_EUNSAFEKEY, "the program reads more than %d headers; "
                              "pass an extra digest over them instead", MAX_HEADERS);
        goto done;
    }
    void *items = r->seen;
    if ((rc = grow(&items, &r->seen_cap, r->num_seen, sizeof *r->seen)))
        goto done;
    r->seen = items;
    r->seen[r->num_seen++] = (seen_file){f.st.dev, f.st.ino, dst.dev, dst.ino};
    /* A file of the same path read from another directory is the same
     * bytes to the key: it is listed once. */
    int listed = 0;
    for (size_t i = 0; i < s->num_files && !listed; i++)
        listed = !strcmp(s->files[i].path, path);
    if (!listed) {
        items = s->files;
        if ((rc = grow(&items, &r->files_cap, s->num_files, sizeof *s->files)))
            goto done;
        s->files = items;
        if (!(f.path = progcache__strdup(path))) {
            rc = progcache__error(PROGCACHE_ENOMEM, "out of memory listing the headers");
            goto done;
        }
        f.too_new = f.st.mtime_ns > s->time_ns - PROGCACHE__HEADER_TOO_NEW_NS ||
                    f.st.ctime_ns > s->time_ns - PROGCACHE__HEADER_TOO_NEW_NS;
        s->files[s->num_files++] = f;
    }
    char *label = progcache__strdup(path);
    rc = queue_text(r, text, len, dir, label, found_at);
    dir = NULL;
done:
    progcache__free(dir);
    progcache__free(text);
    return rc;
}

/* ---- resolving one include ------------------------------------------------------------ */

static const progcache_header *memory_header(const resolver *r, const char *name, size_t *index)
{
    for (size_t i = 0; i < r->o->num_headers; i++)
        if (!strcmp(r->o->headers[i].name, name)) {
            *index = i;
            return &r->o->headers[i];
        }
    return NULL;
}

static int visit_memory(resolver *r, const progcache_header *h, size_t index)
{
    if (r->memory_seen[index])
        return PROGCACHE_OK;
    r->memory_seen[index] = 1;
    size_t len = h->length ? h->length : strlen(h->content);
    size_t n = strlen(h->name) + 32;
    char *label = progcache__malloc(n);
    if (label)
        snprintf(label, n, "header \"%s\" (in memory)", h->name);
    return queue_text(r, h->content, len, progcache__path_dir(h->name), label, -1);
}

/* Where the include would be read: found (opened and read into the scan),
 * a toolkit header, or nowhere. */
typedef enum found { FOUND_NONE, FOUND_FILE, FOUND_TOOLKIT, FOUND_BUNDLED } found;

/* Try one candidate path. */
static int try_candidate(resolver *r, const char *path, int index, found *how)
{
    char real[PATH_MAX];
    struct stat st;
    *how = FOUND_NONE;
    if (stat(path, &st) != 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return missing(r, path);
        return progcache__error_errno(progcache__code_from_errno(errno), errno,
                                      "cannot look at header \"%s\"", path);
    }
    if (S_ISREG(st.st_mode) && realpath(path, real) && progcache__toolkit_contains(real)) {
        r->out->toolkit = 1;
        *how = FOUND_TOOLKIT;
        return PROGCACHE_OK;
    }
    int rc = read_header(r, path, index);
    if (rc == PROGCACHE_ENOTFOUND) /* gone meanwhile */
        return missing(r, path);
    if (!rc)
        *how = FOUND_FILE;
    return rc;
}

static int refuse(const pending *from, const include_item *it, const char *why)
{
    const char *open = it->form == PROGCACHE__INCLUDE_ANGLED ? "<" : "\"";
    const char *close = it->form == PROGCACHE__INCLUDE_ANGLED ? ">" : "\"";
    if (it->form == PROGCACHE__INCLUDE_COMPUTED)
        open = close = "";
    return progcache__error(PROGCACHE_EUNSAFEKEY,
                            "%s:%u: #%s %s%s%s: %s; the cache key cannot cover what NVRTC "
                            "would read: pass an extra digest over the headers the program "
                            "reads, or compile without the cache",
                            from->label, it->line,
                            it->probe ? "if __has_include" : it->next ? "include_next" : "include",
                            open, it->name, close, why);
}

/* Whether the file that includes it also asks __has_include about the same
 * name: the usual guard of an optional header. Its absence is then
 * recorded (a file appearing changes the key), not refused. */
static int guarded(const pending *from, const include_item *it)
{
    for (size_t i = 0; i < from->num_items; i++) {
        const include_item *p = &from->items[i];
        if (p->probe && p->form == it->form && !strcmp(p->name, it->name))
            return 1;
    }
    return 0;
}

static int resolve(resolver *r, const pending *from, const include_item *it)
{
    if (it->form == PROGCACHE__INCLUDE_COMPUTED)
        return refuse(from, it, it->name[0] ? "a computed include (a macro, or a name the "
                                              "scanner cannot read), whose file cannot be known "
                                              "without preprocessing"
                                            : "an include that names no file");
    size_t index;
    const progcache_header *h = memory_header(r, it->name, &index);
    if (h)
        return visit_memory(r, h, index);
    found how = FOUND_NONE;
    int rc = PROGCACHE_OK;
    if (it->name[0] == '/') {
        rc = try_candidate(r, it->name, -1, &how);
    } else {
        /* The includer's directory for "quoted" names, then the include
         * paths (after the includer's for #include_next). */
        if (it->form == PROGCACHE__INCLUDE_QUOTED && !it->next && !r->paths.no_source_include &&
            from->dir) {
            char *path = progcache__path_join(from->dir, it->name);
            if (!path)
                return progcache_error_code();
            rc = try_candidate(r, path, -1, &how);
            progcache__free(path);
        }
        size_t first = it->next && from->found_at >= 0 ? (size_t)from->found_at + 1 : 0;
        for (size_t i = first; !rc && how == FOUND_NONE && i < r->paths.num_dirs; i++) {
            char *path = progcache__path_join(r->paths.dirs[i], it->name);
            if (!path)
                return progcache_error_code();
            rc = try_candidate(r, path, (int)i, &how);
            progcache__free(path);
        }
    }
    if (rc)
        return rc;
    /* NVRTC's bundled headers (--use-bundled-headers=<dir>, searched after
     * the include paths): installed by NVRTC, whose version is in the key,
     * and not read, as the toolkit's are not; keyed as cuda.core keys
     * them, by the option alone. NVRTC installs them at its first compile,
     * so the directory need not exist yet: a name found nowhere else is
     * NVRTC's to supply, or its compile fails. */
    if (how == FOUND_NONE && r->paths.bundled && it->name[0] != '/') {
        r->bundled_used = 1;
        how = FOUND_BUNDLED;
    }
    if (how == FOUND_NONE && !it->probe && !guarded(from, it))
        return refuse(from, it,
                      r->paths.num_dirs ? "no such file where NVRTC looks (the including file's "
                                    "directory, then the include paths)"
                                  : "no such file where NVRTC looks (the including file's "
                                    "directory; no include path is given)");
    return PROGCACHE_OK;
}

/* A pre-included file: the working directory, then the include paths. */
static int resolve_pre(resolver *r, const char *name)
{
    size_t index;
    const progcache_header *h = memory_header(r, name, &index);
    if (h)
        return visit_memory(r, h, index);
    found how = FOUND_NONE;
    int rc = try_candidate(r, name, -1, &how);
    for (size_t i = 0; !rc && how == FOUND_NONE && name[0] != '/' && i < r->paths.num_dirs; i++) {
        char *path = progcache__path_join(r->paths.dirs[i], name);
        if (!path)
            return progcache_error_code();
        rc = try_candidate(r, path, (int)i, &how);
        progcache__free(path);
    }
    if (!rc && how == FOUND_NONE)
        return progcache__error(PROGCACHE_EUNSAFEKEY,
                                "the pre-included header \"%s\" is not in the working "
                                "directory or any include path; the cache key cannot cover "
                                "what NVRTC would read: pass an extra digest over the headers "
                                "the program reads, or compile without the cache",
                                name);
    return rc;
}

/* When toolkit headers are reached: an include path searched before the
 * toolkit's could hold a file that takes the place of a header a toolkit
 * header includes (those includes are not scanned). Refused when it holds
 * a name the toolkit's include directory has; else watched (a new file in
 * it changes its times). */
static int check_shadowing(resolver *r)
{
    size_t num_names;
    const char *const *names = progcache__toolkit_top_names(&num_names);
    for (size_t i = 0; i < r->paths.num_dirs; i++) {
        char real[PATH_MAX];
        if (realpath(r->paths.dirs[i], real) &&
            (progcache__toolkit_contains(real) || !strcmp(real, progcache__toolkit_include())))
            return PROGCACHE_OK; /* the toolkit's own directories come first from here */
        progcache__file_stat st;
        if (progcache__file_stat_of(&st, r->paths.dirs[i]) != 0)
            continue; /* missing: recorded where its headers were looked for */
        for (size_t k = 0; k < num_names; k++) {
            char *path = progcache__path_join(r->paths.dirs[i], names[k]);
            if (!path)
                return progcache_error_code();
            struct stat s;
            int there = lstat(path, &s) == 0;
            progcache__free(path);
            if (there)
                return progcache__error(PROGCACHE_EUNSAFEKEY,
                                        "include path \"%s\" is searched before the CUDA "
                                        "toolkit's (%s) and holds \"%s\", which could take the "
                                        "place of a header the toolkit's headers include: put "
                                        "the toolkit's include paths first, or pass an extra "
                                        "digest over the headers the program reads",
                                        r->paths.dirs[i], progcache__toolkit_include(), names[k]);
        }
        int rc = add_dir(r, r->paths.dirs[i], &st);
        if (rc)
            return rc;
    }
    return PROGCACHE_OK;
}

/* When bundled headers are reached: an include path (searched before the
 * bundled directory) holding a top-level name of that directory could take
 * the place of a header a bundled header includes, which the scan does not
 * follow: refused; else watched. The names are the directory's, or, before
 * NVRTC has installed it, the toolkit's (the same set of headers). */
static int check_bundled_shadowing(resolver *r)
{
    DIR *d = opendir(r->paths.bundled);
    size_t num_names = 0;
    const char *const *names = d ? NULL : progcache__toolkit_top_names(&num_names);
    for (size_t i = 0; i < r->paths.num_dirs; i++) {
        progcache__file_stat st;
        if (progcache__file_stat_of(&st, r->paths.dirs[i]) != 0)
            continue;
        const char *clash = NULL;
        char *path = NULL;
        if (d) {
            rewinddir(d);
            struct dirent *e;
            for (unsigned n = 0; !clash && n < 4096 && (e = readdir(d)); n++) {
                struct stat s;
                if (e->d_name[0] == '.' || !(path = progcache__path_join(r->paths.dirs[i],
                                                                         e->d_name)))
                    continue;
                if (lstat(path, &s) == 0)
                    clash = e->d_name;
                progcache__free(path);
            }
        }
        for (size_t k = 0; !clash && k < num_names; k++) {
            struct stat s;
            if (!(path = progcache__path_join(r->paths.dirs[i], names[k])))
                continue;
            if (lstat(path, &s) == 0)
                clash = names[k];
            progcache__free(path);
        }
        if (clash) {
            int rc = progcache__error(PROGCACHE_EUNSAFEKEY,
                                      "include path \"%s\" is searched before NVRTC's bundled "
                                      "headers (%s) and holds \"%s\", which could take the "
                                      "place of a header the bundled headers include: pass an "
                                      "extra digest over the headers the program reads",
                                      r->paths.dirs[i], r->paths.bundled, clash);
            if (d)
                closedir(d);
            return rc;
        }
        int rc = add_dir(r, r->paths.dirs[i], &st);
        if (rc) {
            if (d)
                closedir(d);
            return rc;
        }
    }
    if (d)
        closedir(d);
    return PROGCACHE_OK;
}

/* ---- the scan ---------------------------------------------------------------------------- */

void progcache__header_scan_free(progcache__header_scan *out)
{
    if (!out)
        return;
    for (size_t i = 0; i < out->num_files; i++)
        progcache__free(out->files[i].path);
    for (size_t i = 0; i < out->num_dirs; i++)
        progcache__free(out->dirs[i].path);
    progcache__free(out->files);
    progcache__free(out->dirs);
    memset(out, 0, sizeof *out);
}

int progcache__header_scan_run(progcache__header_scan *out, const progcache_key_nvrtc_options *o)
{
    progcache__header_scan_free(out);
    resolver r;
    memset(&r, 0, sizeof r);
    r.o = o;
    r.out = out;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    out->time_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
    int rc = progcache__include_paths_parse(&r.paths, o);
    if (!rc && o->num_headers && !(r.memory_seen = progcache__calloc(o->num_headers, 1)))
        rc = progcache__error(PROGCACHE_ENOMEM, "out of memory listing the headers");
    for (size_t i = 0; !rc && i < r.paths.num_pre; i++)
        rc = resolve_pre(&r, r.paths.pre[i]);
    if (!rc) {
        const char *name = o->name ? o->name : "default_program";
        size_t len = o->source_len ? o->source_len : strlen(o->source);
        rc = queue_text(&r, o->source, len, progcache__path_dir(name), progcache__strdup(name), -1);
    }
    while (!rc && r.queue_next < r.queue_len) {
        /* r.queue moves as it grows: work on a copy of the entry. */
        pending p = r.queue[r.queue_next];
        for (size_t i = 0; !rc && i < p.num_items; i++)
            rc = resolve(&r, &p, &p.items[i]);
        free_pending(&r.queue[r.queue_next]);
        memset(&r.queue[r.queue_next], 0, sizeof r.queue[r.queue_next]);
        r.queue_next++;
    }
    if (!rc && r.bundled_used)
        rc = check_bundled_shadowing(&r);
    if (!rc && out->toolkit) {
        rc = check_shadowing(&r);
        if (!rc)
            rc = progcache__toolkit_identity(out->toolkit_id);
    }
    for (size_t i = r.queue_next; i < r.queue_len; i++)
        free_pending(&r.queue[i]);
    progcache__free(r.queue);
    progcache__free(r.seen);
    progcache__free(r.memory_seen);
    progcache__include_paths_free(&r.paths);
    if (rc)
        progcache__header_scan_free(out);
    return rc;
}

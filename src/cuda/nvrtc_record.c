/* The NVRTC version a key carries, on compile-or-load's path, without
 * loading NVRTC (docs/KEY.md, "NVRTC version").
 *
 * Every key holds the version of the NVRTC that would compile (cuda.core's
 * does). Asking NVRTC means mapping it, which a hit must not pay and a
 * driver-only node cannot. So a cache directory keeps records
 * (progcache/nvrtc-<uid>, src/dir/dir_nvrtc.c): for each NVRTC
 * library that compiled into it, or into the cache a bundle was exported
 * from, its version and its file's identity (real path, size, change
 * time). Then:
 *
 *  - NVRTC loaded in this process: it answers. A compile-or-load that
 *    ends with NVRTC loaded writes its line (at the end of the call, so
 *    that the entry's own reads and writes come first).
 *  - PROGCACHE_NVRTC_VERSION set: that (a compile then checks it).
 *  - The file a load would open (found with a stat) has a record with the
 *    same identity: the record's version. Any change to the file (an
 *    update in place, a reinstall) is a new identity: NVRTC is loaded and
 *    asked, and the records get a line.
 *  - No NVRTC anywhere (a load fails): the records' version when all their
 *    lines agree; none, or two versions, is an error that says what to do.
 *
 * Two processes that add a line at once may lose one: the next compile
 * adds it again, and until then a lookup loads NVRTC. Never a wrong key. */
#include "cuda/nvrtc_record.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "buf.h"
#include "cache/cache_stats.h"
#include "error.h"
#include "key/nvrtc_lib.h"
#include "progcache/file.h"
#include "dir/dir.h"

#define MAX_LINES PROGCACHE__NVRTC_RECORD_LINES
/* The longest line: the path, the build ID in hex, the numbers. */
#define LINE_MAX_BYTES (PATH_MAX + 2 * PROGCACHE__BUILD_ID_MAX + 128)

typedef struct line {
    int major, minor;
    int legacy; /* a line written before build IDs were: names no file as it is now */
    progcache__nvrtc_file file;
} line;

typedef struct records {
    line lines[MAX_LINES];
    size_t n;
} records;

/* The cache directory behind the handle, or NULL (no records then). */
static progcache_file *home_dir(progcache *cache)
{
    return cache ? progcache_store_as_file(progcache__cache_home(cache)) : NULL;
}

/* "<major>.<minor> <size> <ctime> <build ID> <path>": the build ID in
 * hex, "-" for none; the path last, as it may hold spaces. */
static int format_line(char *buf, size_t len, int major, int minor,
                       const progcache__nvrtc_file *f)
{
    char id[2 * PROGCACHE__BUILD_ID_MAX + 1] = "-";
    for (size_t i = 0; i < f->build_id_len && i < PROGCACHE__BUILD_ID_MAX; i++)
        snprintf(id + 2 * i, 3, "%02x", f->build_id[i]);
    return snprintf(buf, len, "%d.%d %lld %lld.%09ld %s %s\n", major, minor, f->size,
                    f->ctime_sec, f->ctime_nsec, id, f->path);
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* The build ID field at text (up to the next space) into f; the length of
 * the field, or 0 when it is not one ("-", or lowercase hex, an even
 * number of digits, at most PROGCACHE__BUILD_ID_MAX bytes). */
static size_t parse_build_id(progcache__nvrtc_file *f, const char *text)
{
    const char *sp = strchr(text, ' ');
    size_t n = sp ? (size_t)(sp - text) : 0;
    f->build_id_len = 0;
    if (n == 1 && text[0] == '-')
        return 1;
    if (!n || n % 2 || n / 2 > sizeof f->build_id)
        return 0;
    for (size_t i = 0; i < n; i += 2) {
        int hi = hex_digit(text[i]), lo = hex_digit(text[i + 1]);
        if (hi < 0 || lo < 0)
            return 0;
        f->build_id[i / 2] = (unsigned char)(hi << 4 | lo);
    }
    f->build_id_len = n / 2;
    return n;
}

/* One record line (no newline) into l: 1, or 0 when it is not one. A line
 * of the format before build IDs ("<version> <size> <ctime> <path>") is
 * read as legacy: its version counts where no NVRTC is at hand, but it
 * names no file as it is now, so NVRTC is loaded once more and the line
 * of today's format written. */
static int parse_line(line *l, const char *text)
{
    int used = 0;
    memset(l, 0, sizeof *l);
    if (sscanf(text, "%d.%d %lld %lld.%ld %n", &l->major, &l->minor, &l->file.size,
               &l->file.ctime_sec, &l->file.ctime_nsec, &used) != 5 ||
        used <= 0 || l->major <= 0)
        return 0;
    const char *rest = text + used;
    if (rest[0] == '/') {
        l->legacy = 1;
    } else {
        size_t n = parse_build_id(&l->file, rest);
        if (!n)
            return 0;
        rest += n + 1;
    }
    if (rest[0] != '/' || strlen(rest) >= sizeof l->file.path)
        return 0;
    snprintf(l->file.path, sizeof l->file.path, "%s", rest);
    return 1;
}

/* The cache's records; a file that is missing or unreadable is no line. */
static void read_records(records *r, progcache *cache)
{
    r->n = 0;
    progcache_file *dir = home_dir(cache);
    if (!dir)
        return;
    progcache__error_saved saved;
    progcache__error_save(&saved);
    progcache_buf bytes = PROGCACHE_BUF_INIT;
    if (progcache__file_nvrtc_read(dir, &bytes) == PROGCACHE_OK && bytes.size) {
        const char *p = (const char *)bytes.data;
        const char *end = p + bytes.size;
        while (p < end && r->n < MAX_LINES) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            if (!nl)
                break;
            char text[LINE_MAX_BYTES];
            size_t len = (size_t)(nl - p);
            if (len < sizeof text) {
                memcpy(text, p, len);
                text[len] = '\0';
                r->n += (size_t)parse_line(&r->lines[r->n], text);
            }
            p = nl + 1;
        }
    }
    progcache_buf_free(&bytes);
    progcache__error_restore(&saved);
}

static const line *find(const records *r, const progcache__nvrtc_file *f)
{
    for (size_t i = 0; i < r->n; i++)
        if (!r->lines[i].legacy && progcache__nvrtc_same_file(&r->lines[i].file, f))
            return &r->lines[i];
    return NULL;
}

/* Add the loaded NVRTC's line to the cache's records when they lack it.
 * 1 when the records hold it afterwards. */
static int write_line(progcache *cache, const records *r, const progcache__nvrtc_file *f,
                      int major, int minor);

static int write_loaded(progcache *cache, const records *r)
{
    const progcache__nvrtc_api *api = progcache__nvrtc_loaded();
    progcache__nvrtc_file f;
    if (!api || progcache__nvrtc_loaded_file(&f) != PROGCACHE_OK)
        return 0;
    return write_line(cache, r, &f, api->major, api->minor);
}

/* Add the line "file f is NVRTC major.minor" when r lacks it. 1 when the
 * records hold it afterwards. */
static int write_line(progcache *cache, const records *r, const progcache__nvrtc_file *f,
                      int major, int minor)
{
    progcache_file *dir = home_dir(cache);
    if (!dir || progcache__cache_read_only(cache))
        return 0;
    const line *have = find(r, f);
    if (have && have->major == major && have->minor == minor)
        return 1;
    progcache__error_saved saved;
    progcache__error_save(&saved);
    char buf[LINE_MAX_BYTES];
    int n = format_line(buf, sizeof buf, major, minor, f);
    int ok = n > 0 && (size_t)n < sizeof buf &&
             progcache__file_nvrtc_add(dir, buf, (size_t)n, MAX_LINES) == PROGCACHE_OK;
    if (!ok)
        progcache__cache_log(cache, PROGCACHE_LOG_INFO,
                             "progcache: could not keep the NVRTC version record (later "
                             "lookups load NVRTC to learn its version): %s",
                             progcache_error_last());
    progcache__error_restore(&saved);
    return ok;
}

/* The cache directory whose records this process last found or made
 * hold the loaded NVRTC's line: later calls on it do nothing. */
static pthread_mutex_t noted_lock = PTHREAD_MUTEX_INITIALIZER;
static char *noted;

static int already_noted(const char *path, int set)
{
    pthread_mutex_lock(&noted_lock);
    int same = noted && !strcmp(noted, path);
    if (set && !same) {
        progcache__free(noted);
        noted = progcache__strdup(path);
    }
    pthread_mutex_unlock(&noted_lock);
    return same;
}

const char PROGCACHE__NVRTC_LOADED_FOR_KEY[] = "NVRTC, loaded to learn the key's version";

void progcache__nvrtc_record_loaded(progcache *cache)
{
    if (!progcache__nvrtc_loaded() || !home_dir(cache) || !progcache__cache_path(cache) ||
        already_noted(progcache__cache_path(cache), 0))
        return;
    records *r = progcache__calloc(1, sizeof *r);
    if (!r)
        return;
    read_records(r, cache);
    if (write_loaded(cache, r))
        already_noted(progcache__cache_path(cache), 1);
    progcache__free(r);
}

int progcache__nvrtc_record_lookup(progcache *cache, const progcache__nvrtc_file *f, int *major,
                                   int *minor)
{
    records *r = progcache__calloc(1, sizeof *r);
    if (!r)
        return 0;
    read_records(r, cache);
    const line *l = find(r, f);
    if (l) {
        *major = l->major;
        *minor = l->minor;
    }
    progcache__free(r);
    return l != NULL;
}

void progcache__nvrtc_record_note(progcache *cache, const progcache__nvrtc_file *f, int major,
                                  int minor)
{
    records *r = progcache__calloc(1, sizeof *r);
    if (!r)
        return;
    read_records(r, cache);
    (void)write_line(cache, r, f, major, minor);
    progcache__free(r);
}

static int no_nvrtc(progcache *cache, const records *r, const char *load_error)
{
    if (cache)
        progcache__cache_record(cache, PROGCACHE_STAT_NVRTC_MISSING, 1);
    if (r->n == 0)
        return progcache__error(
            PROGCACHE_ENOCUDA,
            "%s; and the cache%s%s holds no record of the NVRTC version its entries were "
            "compiled with (every key carries it). On a node without NVRTC: import a bundle "
            "that `progcache export` made where the kernels were compiled (it carries the "
            "record), or set PROGCACHE_NVRTC_VERSION=<major>.<minor>",
            load_error, progcache__cache_path(cache) ? " " : "", progcache__cache_path(cache) ? progcache__cache_path(cache) : "");
    char versions[256] = "";
    size_t len = 0;
    for (size_t i = 0; i < r->n; i++) {
        char v[32];
        snprintf(v, sizeof v, "%d.%d", r->lines[i].major, r->lines[i].minor);
        if (!strstr(versions, v) && len + strlen(v) + 3 < sizeof versions)
            len += (size_t)snprintf(versions + len, sizeof versions - len, "%s%s",
                                    len ? ", " : "", v);
    }
    return progcache__error(PROGCACHE_ENOCUDA,
                            "%s; and the cache's records name several NVRTC versions (%s), "
                            "so which one a key should carry is not known: set "
                            "PROGCACHE_NVRTC_VERSION to the one to use",
                            load_error, versions);
}

/* NVRTC for a compile, the NVRTC the key was derived for: one whose
 * version differs (PROGCACHE_NVRTC_VERSION says otherwise) would store its
 * artifact under another NVRTC's key. */
int progcache__nvrtc_for_compile(progcache *cache, const progcache_key_nvrtc_options *o,
                                 const char *how)
{
    const char *name = o->name ? o->name : "default_program";
    const progcache__nvrtc_api *nv;
    if (progcache__nvrtc_load(&nv)) {
        if (cache)
            progcache__cache_record(cache, PROGCACHE_STAT_NVRTC_MISSING, 1);
        progcache__error_prefix("program '%s' is not in the cache and cannot be compiled here",
                                name);
        progcache__error_append(". A node without NVRTC runs only kernels already in its "
                                "cache: import them (progcache import) from where they were "
                                "compiled");
        return PROGCACHE_ENOCUDA;
    }
    if (how && (nv->major != o->nvrtc_major || nv->minor != o->nvrtc_minor)) {
        /* The remedy is where the version came from. A record (one of
         * this user's or root's that passed the trust check, but wrong:
         * written for another NVRTC at that path, or edited) is never
         * blamed on a variable nobody set (issue 29): it is ignored from
         * now on in this process (forgotten), counted, and replaced by
         * this NVRTC's line at the end of the call, so the next lookup
         * carries the right version. */
        char from[PATH_MAX + 200];
        if (!strncmp(how, "record", 6)) {
            const char *dir = cache ? progcache__cache_path(cache) : NULL;
            progcache__nvrtc_file f;
            if (progcache__nvrtc_loaded_file(&f) == PROGCACHE_OK)
                progcache__nvrtc_remember(&f, 0, 0); /* never "same" again (major 0) */
            if (cache)
                progcache__cache_record(cache, PROGCACHE_STAT_RECORDS_UNTRUSTED, 1);
            snprintf(from, sizeof from,
                     "the NVRTC record in %s/progcache/ (nvrtc-%u or nvrtc-0), which is wrong "
                     "for this NVRTC: it is ignored from now on and gets this NVRTC's line; "
                     "run again",
                     dir ? dir : "the cache directory", (unsigned)geteuid());
        } else {
            snprintf(from, sizeof from, "%s: fix or unset it", how);
        }
        return progcache__error(PROGCACHE_ECOMPILE,
                                "program '%s' was looked up for NVRTC %d.%d, but the NVRTC that "
                                "would compile it is %d.%d: not compiled, so that no artifact "
                                "is stored under another NVRTC's key. The version came from %s",
                                name, o->nvrtc_major, o->nvrtc_minor, nv->major, nv->minor,
                                from);
    }
    return PROGCACHE_OK;
}

static int from_records(int *major, int *minor, const char **how, progcache *cache,
                        records *r);

PROGCACHE_HOT
int progcache__nvrtc_key_version(int *major, int *minor, const char **how, progcache *cache)
{
    int rc = progcache__nvrtc_version_known(major, minor, how);
    if (rc != PROGCACHE_ENOTFOUND)
        return rc;
    /* 16 lines of a PATH_MAX path each: not for a thread's stack. */
    records *r = progcache__calloc(1, sizeof *r);
    if (!r)
        return progcache__error(PROGCACHE_ENOMEM, "out of memory reading the NVRTC record");
    rc = from_records(major, minor, how, cache, r);
    progcache__free(r);
    return rc;
}

int progcache_nvrtc_version_cache(int *major, int *minor, progcache *cache)
{
    if (!major || !minor)
        return progcache__error(PROGCACHE_EINVAL,
                                "progcache_nvrtc_version_cache: major or minor is NULL");
    const char *how;
    return progcache__nvrtc_key_version(major, minor, &how, cache);
}

static int from_records(int *major, int *minor, const char **how, progcache *cache,
                        records *r)
{
    read_records(r, cache);
    progcache__nvrtc_file cand;
    if (progcache__nvrtc_candidate(&cand) == PROGCACHE_OK) {
        const line *l = find(r, &cand);
        if (l) {
            *major = l->major;
            *minor = l->minor;
            *how = "record";
            progcache__nvrtc_remember(&cand, l->major, l->minor);
            return PROGCACHE_OK;
        }
    }
    const progcache__nvrtc_api *api;
    if (progcache__nvrtc_load(&api) == PROGCACHE_OK) {
        *major = api->major;
        *minor = api->minor;
        *how = PROGCACHE__NVRTC_LOADED_FOR_KEY;
        return PROGCACHE_OK;
    }
    /* No NVRTC here: the version the cache's entries were compiled with. */
    char load_error[1024];
    snprintf(load_error, sizeof load_error, "%s", progcache_error_last());
    int first_major = r->n ? r->lines[0].major : 0, first_minor = r->n ? r->lines[0].minor : 0;
    for (size_t i = 1; i < r->n; i++)
        if (r->lines[i].major != first_major || r->lines[i].minor != first_minor)
            return no_nvrtc(cache, r, load_error);
    if (!r->n)
        return no_nvrtc(cache, r, load_error);
    progcache_error_clear();
    *major = first_major;
    *minor = first_minor;
    *how = "record (no NVRTC here)";
    return PROGCACHE_OK;
}

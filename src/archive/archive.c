/* Export of a cache directory as a POSIX ustar archive (docs/FORMAT.md,
 * "Archives"); the format both directions share is in archive_ustar.c,
 * import in archive_import.c.
 *
 * An archive holds the entries as regular files entries/<2 hex>/<62 hex>,
 * exactly the cache directory's own layout, so `tar -xf` into an empty
 * directory gives a working cache and `tar -cf x.tar entries` in a cache
 * directory gives an archive progcache imports.
 *
 * Export never replaces what is not a regular file: a regular file (or
 * none) at the path gets a temp file renamed over it, a character device
 * or a FIFO is written in place, anything else is refused. */
#include "archive/archive.h"
#include "archive/archive_sign.h"

#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "buf.h"
#include "error.h"
#include "fs.h"
#include "options.h"
#include "dir/dir.h"

#define TAR_RECORD (20 * TAR_BLOCK) /* archives are padded to whole records */

/* ---- export ------------------------------------------------------------------- */

#define WRITE_BUFFER 65536

typedef struct export_ctx {
    int fd;
    const char *name; /* the archive, for messages */
    const progcache_archive_options *opts;
    progcache_archive_result *out;
    uint64_t written;
    unsigned char *buf; /* WRITE_BUFFER bytes not yet written */
    size_t buffered;
    uint64_t expected; /* entries, from the accounting: the progress total */
    bundle_writer *bundle; /* signing (archive_sign.c), or NULL */
} export_ctx;

/* Write all of buf to fd. SIGPIPE is blocked meanwhile (and one it raised
 * consumed): the archive may go to a pipe whose reader has gone, and a
 * library must not kill its caller for that; the write fails with EPIPE.
 * A descriptor the caller left non-blocking is waited on. 0 or -1/errno. */
static int write_fd(int fd, const unsigned char *buf, size_t len)
{
    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    int rc = 0, err = 0;
    if (progcache__fs_over_size_limit(fd, len)) {
        err = EFBIG;
        rc = -1;
        len = 0;
    }
    while (len) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            (void)poll(&p, 1, -1);
            continue;
        }
        if (n <= 0) {
            err = n < 0 ? errno : EIO;
            rc = -1;
            break;
        }
        buf += n;
        len -= (size_t)n;
    }
    if (err == EPIPE && !sigismember(&old, SIGPIPE)) {
        sigset_t pending;
        struct timespec zero = {0, 0};
        if (sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE))
            sigtimedwait(&pipe_set, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = err;
    return rc;
}

static int flush_bytes(export_ctx *x)
{
    if (x->buffered && write_fd(x->fd, x->buf, x->buffered) != 0)
        return progcache__error_errno(PROGCACHE_EIO, errno, "cannot write archive %s", x->name);
    x->buffered = 0;
    return PROGCACHE_OK;
}

static int write_bytes(export_ctx *x, const void *data, size_t len)
{
    const unsigned char *p = data;
    if (x->bundle && progcache__bundle_hash(x->bundle, data, len))
        return PROGCACHE_ENOMEM;
    while (len) {
        size_t n = WRITE_BUFFER - x->buffered < len ? WRITE_BUFFER - x->buffered : len;
        memcpy(x->buf + x->buffered, p, n);
        x->buffered += n;
        x->written += n;
        p += n;
        len -= n;
        if (x->buffered == WRITE_BUFFER) {
            int rc = flush_bytes(x);
            if (rc)
                return rc;
        }
    }
    return PROGCACHE_OK;
}

/* Before an entry with records (its seal vouches for them): a pax
 * extended header carrying them as the extended attribute they are in
 * the cache directory, which GNU tar --xattrs restores too. */
static int write_records(export_ctx *x, const progcache_entry *e)
{
    const progcache_buf *records = &e->meta->records;
    /* "<length> <key>=<value>\n", the length counting its own digits. */
    size_t body = 1 + (sizeof PAX_RECORDS_KEY - 1) + 1 + records->size + 1, len = body + 1;
    char digits[24];
    for (;;) {
        int n = snprintf(digits, sizeof digits, "%zu", len);
        if (body + (size_t)n == len)
            break;
        len = body + (size_t)n;
    }
    unsigned char block[TAR_BLOCK];
    char name[100];
    snprintf(name, sizeof name, "entries/%.2s/PaxHeaders/%s", e->name, e->name + 2);
    if (progcache__tar_make(block, name, len, e->mtime_ns / 1000000000) != 0)
        return progcache__error(PROGCACHE_EIO, "the records of entry %s do not fit an archive",
                                e->name);
    block[156] = 'x';
    /* The type changed: the header's checksum again (8 bytes at 148: six
     * octal digits, NUL, space; computed with the field as spaces). */
    memset(block + 148, ' ', 8);
    unsigned sum = 0;
    for (size_t i = 0; i < TAR_BLOCK; i++)
        sum += block[i];
    snprintf((char *)block + 148, 8, "%06o", sum);
    block[155] = ' ';
    int rc = write_bytes(x, block, sizeof block);
    if (!rc)
        rc = write_bytes(x, digits, strlen(digits));
    if (!rc)
        rc = write_bytes(x, " " PAX_RECORDS_KEY "=", sizeof PAX_RECORDS_KEY + 1);
    if (!rc)
        rc = write_bytes(x, records->data, records->size);
    if (!rc)
        rc = write_bytes(x, "\n", 1);
    static const unsigned char zeros[TAR_BLOCK];
    if (!rc && len % TAR_BLOCK)
        rc = write_bytes(x, zeros, TAR_BLOCK - len % TAR_BLOCK);
    return rc;
}

static int export_visit(void *ctx, const progcache_entry *e)
{
    export_ctx *x = ctx;
    if (e->error)
        return progcache__error(PROGCACHE_EIO, "cannot export entry %s: %s", e->name, e->error);
    unsigned char block[TAR_BLOCK];
    char name[80];
    int rc = e->meta ? write_records(x, e) : PROGCACHE_OK;
    if (rc)
        return rc;
    snprintf(name, sizeof name, "entries/%.2s/%s", e->name, e->name + 2);
    if (progcache__tar_make(block, name, e->size, e->mtime_ns / 1000000000) != 0)
        return progcache__error(PROGCACHE_EIO, "entry %s is too large for a ustar archive",
                                e->name);
    rc = write_bytes(x, block, sizeof block);
    if (!rc)
        rc = write_bytes(x, e->data, (size_t)e->size);
    static const unsigned char zeros[TAR_BLOCK];
    if (!rc && e->size % TAR_BLOCK)
        rc = write_bytes(x, zeros, TAR_BLOCK - e->size % TAR_BLOCK);
    if (rc)
        return rc;
    if (x->bundle && (rc = progcache__bundle_add(x->bundle, e)))
        return rc;
    x->out->entries++;
    x->out->bytes += e->size;
    if (e->artifact && !e->artifact->valid)
        x->out->invalid++;
    if (x->opts && x->opts->on_entry && (rc = x->opts->on_entry(x->opts->ctx, e)))
        return rc;
    if (x->opts && x->opts->on_progress) {
        uint64_t total = x->expected > x->out->entries ? x->expected : x->out->entries;
        return x->opts->on_progress(x->opts->ctx, "exporting", x->out->entries, total);
    }
    return 0;
}

/* First, the NVRTC versions the entries were compiled with (the records
 * of this cache, dir/dir_nvrtc.c), so that a node without NVRTC derives the
 * same keys after an import. None: no member. */
static int write_nvrtc(export_ctx *x, progcache_file *fs)
{
    progcache_buf text = PROGCACHE_BUF_INIT;
    unsigned char block[TAR_BLOCK];
    static const unsigned char zeros[TAR_BLOCK];
    int rc = progcache__file_nvrtc_read(fs, &text);
    if (!rc && text.size) {
        if (progcache__tar_make(block, PROGCACHE__NVRTC_MEMBER, text.size, time(NULL)) != 0)
            rc = progcache__error(PROGCACHE_EIO, "the NVRTC records do not fit an archive");
        if (!rc)
            rc = write_bytes(x, block, sizeof block);
        if (!rc)
            rc = write_bytes(x, text.data, text.size);
        if (!rc && text.size % TAR_BLOCK)
            rc = write_bytes(x, zeros, TAR_BLOCK - text.size % TAR_BLOCK);
    }
    progcache_buf_free(&text);
    return rc;
}

/* The end: a signed archive's manifest and signature, two zero blocks,
 * then zeros to a whole record. */
static int write_trailer(export_ctx *x)
{
    /* Two end blocks and up to a record's padding after them. */
    static const unsigned char zeros[2 * TAR_BLOCK + TAR_RECORD];
    const progcache_buf *signed_end;
    int rc = x->bundle ? progcache__bundle_finish(x->bundle, &signed_end) : PROGCACHE_OK;
    if (!rc && x->bundle)
        rc = write_bytes(x, signed_end->data, signed_end->size);
    if (rc)
        return rc;
    uint64_t end = x->written + 2 * TAR_BLOCK;
    uint64_t pad = (TAR_RECORD - end % TAR_RECORD) % TAR_RECORD;
    return write_bytes(x, zeros, (size_t)(2 * TAR_BLOCK + pad));
}

/* The options struct's size in each version, for progcache__options_load. */
static const size_t archive_options_size[] = {0, offsetof(progcache_archive_options, on_progress),
                                              offsetof(progcache_archive_options, sign_key),
                                              sizeof(progcache_archive_options)};
/* And the result's. */
static const size_t archive_result_size[] = {0, offsetof(progcache_archive_result, verified),
                                             sizeof(progcache_archive_result)};

/* The checks of every export and import: out's version, the options
 * loaded into opts. */
static int archive_load(progcache_archive_result *out, const progcache_archive_options *caller,
                        progcache_archive_options *opts, const char *fn)
{
    progcache_archive_options_init(opts);
    int rc = out ? progcache__version_check(out, PROGCACHE_ARCHIVE_RESULT_VERSION, fn, "out",
                                            "progcache_archive_result")
                 : PROGCACHE_OK;
    if (rc)
        return rc;
    rc = progcache__options_load(opts, caller, archive_options_size,
                                     PROGCACHE_ARCHIVE_OPTIONS_VERSION, fn,
                                     "progcache_archive_options");
    if (!rc && out)
        progcache__struct_init(out, archive_result_size[out->version], out->version);
    return rc;
}

int progcache__archive_args(progcache_file **fs, progcache_archive_result *out,
                            progcache_file *file, const progcache_archive_options *caller,
                            progcache_archive_options *opts, const char *fn)
{
    progcache_archive_options_init(opts);
    int rc = PROGCACHE_OK;
    if (fs) /* NULL: no cache directory (progcache_archive_verify) */
        rc = progcache__admin_file(*fs = file, fn);
    return rc ? rc : archive_load(out, caller, opts, fn);
}

void progcache_archive_options_init(progcache_archive_options *opts)
{
    progcache__struct_init(opts, sizeof *opts, PROGCACHE_ARCHIVE_OPTIONS_VERSION);
}

/* A store's entry (progcache_store_foreach) as the walker's item. One
 * the store could not read (a damaged remote value, which nobody here can
 * remove by name) is left out, and told to on_entry (entry->error), so
 * that one bad value does not keep every other from being exported. */
static int export_store_entry(void *ctx, const progcache_entry *e)
{
    export_ctx *x = ctx;
    if (e->error && !e->data)
        return x->opts && x->opts->on_entry ? x->opts->on_entry(x->opts->ctx, e) : 0;
    return export_visit(ctx, e);
}

/* The whole archive to fd, from its current position: the entries of the
 * cache directory fs, or (fs NULL) of any store that can be listed.
 * fsync'ed when fd is a regular file (a pipe or a device has nothing to
 * sync). */
static int export_to(progcache_file *fs, progcache_store *store, int fd, const char *name,
                     const progcache_archive_options *opts, progcache_archive_result *out)
{
    progcache_archive_result local = PROGCACHE_ARCHIVE_RESULT_INIT;
    export_ctx x = {fd, name, opts, out ? out : &local, 0, NULL, 0, 0, NULL};
    struct stat st;
    int rc = opts->sign_key ? progcache__bundle_writer_new(&x.bundle, opts->sign_key,
                                                           opts->sign_key_len, opts->nvrtc_version)
                            : PROGCACHE_OK;
    if (rc)
        return rc; /* the key (message set) */
    if (!(x.buf = progcache__malloc(WRITE_BUFFER))) {
        progcache__bundle_writer_free(x.bundle);
        return progcache__error(PROGCACHE_ENOMEM, "out of memory writing archive %s", name);
    }
    unsigned int flags = PROGCACHE_ENTRIES_INSPECT | PROGCACHE_ENTRIES_RECORDS;
    /* A cache directory's count is its tier's (the shared counters). */
    progcache_store *counted = fs ? progcache_file_store(fs) : store;
    if (opts && opts->on_progress && progcache_store_count(&x.expected, counted) != 0)
        x.expected = 0; /* not known: progress counts up */
    rc = fs ? write_nvrtc(&x, fs) : PROGCACHE_OK; /* a user tier keeps no NVRTC records */
    if (!rc)
        rc = fs ? progcache_file_foreach(fs, flags, export_visit, &x)
                : progcache_store_foreach(store, flags, export_store_entry, &x);
    if (!rc)
        rc = write_trailer(&x);
    if (!rc)
        rc = flush_bytes(&x);
    if (!rc && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && fsync(fd) != 0)
        rc = progcache__error_errno(PROGCACHE_EIO, errno, "cannot write archive %s", name);
    progcache__free(x.buf);
    progcache__bundle_writer_free(x.bundle);
    return rc;
}

int progcache_file_export_fd(progcache_archive_result *out, progcache_file *file, int fd,
                             const char *name, const progcache_archive_options *opts)
{
    progcache_file *fs;
    progcache_archive_options o;
    int rc = progcache__archive_args(&fs, out, file, opts, &o, "progcache_file_export_fd");
    if (rc)
        return rc;
    opts = &o;
    if (fd < 0)
        return progcache__error(PROGCACHE_EINVAL, "progcache_file_export_fd: fd is %d", fd);
    return export_to(fs, NULL, fd, name && *name ? name : "(file descriptor)", opts, out);
}

int progcache_store_export_fd(progcache_archive_result *out, progcache_store *store, int fd,
                              const char *name, const progcache_archive_options *opts)
{
    static const char fn[] = "progcache_store_export_fd";
    progcache_file *file = progcache_store_as_file(store);
    if (file)
        return progcache_file_export_fd(out, file, fd, name, opts);
    if (!store)
        return progcache__error(PROGCACHE_EINVAL, "%s: store is NULL", fn);
    progcache_archive_options o;
    int rc = archive_load(out, opts, &o, fn);
    if (rc)
        return rc;
    if (fd < 0)
        return progcache__error(PROGCACHE_EINVAL, "%s: fd is %d", fn, fd);
    return export_to(NULL, store, fd, name && *name ? name : "(file descriptor)", &o, out);
}

/* Split path into its directory (opened) and its last component. */
static int open_parent(const char *path, const char **base)
{
    const char *slash = strrchr(path, '/');
    *base = slash ? slash + 1 : path;
    if (!slash)
        return open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    char dir[4096];
    size_t len = slash == path ? 1 : (size_t)(slash - path);
    if (len >= sizeof dir) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(dir, path, len);
    dir[len] = '\0';
    return open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

/* A regular file (or none) at target: written under a temp name next to
 * it and renamed into place when complete, so a failed export leaves no
 * partial archive. name is the path the caller gave, for messages. */
static int export_replace(progcache_file *fs, progcache_store *store, const char *target,
                          const char *name, const progcache_archive_options *opts,
                          progcache_archive_result *out)
{
    const char *base;
    char tmp_name[64];
    int dirfd = open_parent(target, &base), rc;
    if (dirfd < 0 || !*base) {
        rc = progcache__error_errno(PROGCACHE_EIO, *base ? errno : EISDIR,
                                    "cannot write archive %s", name);
        if (dirfd >= 0)
            close(dirfd);
        return rc;
    }
    int fd =
        progcache__fs_create_temp(dirfd, ".progcache-export-", 0666, tmp_name, sizeof tmp_name);
    if (fd < 0) {
        rc = progcache__error_errno(PROGCACHE_EIO, errno, "cannot create archive %s", name);
        close(dirfd);
        return rc;
    }
    rc = export_to(fs, store, fd, name, opts, out);
    if (close(fd) != 0 && !rc)
        rc = progcache__error_errno(PROGCACHE_EIO, errno, "cannot write archive %s", name);
    if (!rc && renameat(dirfd, tmp_name, dirfd, base) != 0)
        rc =
            progcache__error_errno(PROGCACHE_EIO, errno, "cannot rename the archive into %s", name);
    if (rc)
        (void)unlinkat(dirfd, tmp_name, 0);
    close(dirfd);
    return rc;
}

/* A character device or a FIFO at path: written in place, never created,
 * truncated or replaced. The open does not block: a FIFO that nothing
 * reads fails at once (ENXIO) rather than waiting for ever. */
static int export_in_place(progcache_file *fs, progcache_store *store, const char *path,
                           mode_t type, const progcache_archive_options *opts,
                           progcache_archive_result *out)
{
    struct stat st;
    int rc, fd = open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENXIO ? progcache__error(PROGCACHE_EIO,
                                                 "cannot write archive %s: it is a FIFO and "
                                                 "nothing is reading it; start the reader first",
                                                 path)
                              : progcache__error_errno(PROGCACHE_EIO, errno,
                                                       "cannot write archive %s", path);
    int fl = fcntl(fd, F_GETFL);
    if (fstat(fd, &st) != 0 || (st.st_mode & S_IFMT) != type)
        rc = progcache__error(PROGCACHE_EIO,
                              "cannot write archive %s: it changed while it was being opened",
                              path);
    else if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0)
        rc = progcache__error_errno(PROGCACHE_EIO, errno, "cannot write archive %s", path);
    else
        rc = export_to(fs, store, fd, path, opts, out);
    if (close(fd) != 0 && !rc)
        rc = progcache__error_errno(PROGCACHE_EIO, errno, "cannot write archive %s", path);
    return rc;
}

static const char *refused_kind(mode_t mode)
{
    return S_ISDIR(mode)   ? "a directory"
           : S_ISBLK(mode) ? "a block device"
                           : "a socket";
}

/* The archive at path (the rules of progcache_file_export) from the cache
 * directory fs, or (fs NULL) from any store that can be listed. */
static int export_path(progcache_file *fs, progcache_store *store, const char *path,
                       const progcache_archive_options *opts, progcache_archive_result *out)
{
    int rc;
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno != ENOENT)
            return progcache__error_errno(PROGCACHE_EIO, errno, "cannot write archive %s", path);
        return export_replace(fs, store, path, path, opts, out);
    }
    if (S_ISLNK(st.st_mode)) {
        /* Followed, as the caller asked; one that leads nowhere is refused
         * (creating its target would write wherever the link points). */
        if (stat(path, &st) != 0)
            return progcache__error_errno(PROGCACHE_EINVAL, errno,
                                          "cannot write archive %s: it is a symbolic link to "
                                          "a path that does not exist or cannot be used; give "
                                          "the target's path",
                                          path);
        if (S_ISREG(st.st_mode)) {
            char *target = realpath(path, NULL);
            if (!target)
                return progcache__error_errno(PROGCACHE_EIO, errno, "cannot write archive %s",
                                              path);
            rc = export_replace(fs, store, target, path, opts, out);
            free(target);
            return rc;
        }
    }
    if (S_ISREG(st.st_mode))
        return export_replace(fs, store, path, path, opts, out);
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))
        return export_in_place(fs, store, path, st.st_mode & S_IFMT, opts, out);
    return progcache__error(PROGCACHE_EINVAL,
                            "cannot write archive %s: it is %s, which export neither replaces "
                            "nor writes into; give a file name",
                            path, refused_kind(st.st_mode));
}

int progcache_file_export(progcache_archive_result *out, progcache_file *file, const char *path,
                          const progcache_archive_options *opts)
{
    progcache_file *fs;
    if (!path || !*path)
        return progcache__error(PROGCACHE_EINVAL, "progcache_file_export: the archive path is "
                                                  "empty");
    progcache_archive_options o;
    int rc = progcache__archive_args(&fs, out, file, opts, &o, "progcache_file_export");
    return rc ? rc : export_path(fs, NULL, path, &o, out);
}

int progcache_store_export(progcache_archive_result *out, progcache_store *store,
                           const char *path, const progcache_archive_options *opts)
{
    static const char fn[] = "progcache_store_export";
    progcache_file *file = progcache_store_as_file(store);
    if (file)
        return progcache_file_export(out, file, path, opts);
    if (!store || !path || !*path)
        return progcache__error(PROGCACHE_EINVAL, "%s: %s", fn,
                                !store ? "store is NULL" : "the archive path is empty");
    progcache_archive_options o;
    int rc = archive_load(out, opts, &o, fn);
    return rc ? rc : export_path(NULL, store, path, &o, out);
}

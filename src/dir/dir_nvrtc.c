/* The records of NVRTC versions a cache directory keeps:
 * progcache/nvrtc-<uid>, one per user, so that no user's key depends on a
 * file another user may write (docs/FORMAT.md, "NVRTC records"). The lines
 * are src/cuda/nvrtc_record.c's ("<major>.<minor> <size> <ctime> <path>");
 * this file only reads, merges and publishes them. */
#include "dir/dir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "fs.h"
#include "store/file/file_stats.h"
#include "store/file/file_store.h"

static void name_of(char out[32], uid_t uid)
{
    snprintf(out, 32, "nvrtc-%u", (unsigned)uid);
}

/* Said once per process: the lookups that follow read the record again. */
static int said_untrusted;

/* Whether a record may decide this user's keys: owner's, and writable by
 * nobody else. Not even by the team in a group cache: progcache writes
 * records 0600 (the group never needs to), and a group-writable file of
 * the owner's (progcache/lock in a team's cache is 0660) is any member's
 * to fill and rename to nvrtc-<uid> (issue 29). Otherwise counted and said
 * once: a miss of the record, which costs loading NVRTC, never a key
 * derived from it. */
static int record_trusted(file_store *fs, const struct stat *st, uid_t owner, const char *name)
{
    if (st->st_uid == owner && !(st->st_mode & (S_IWGRP | S_IWOTH)))
        return 1;
    progcache__stats_add(fs->stats, PROGCACHE__RECORDS_UNTRUSTED, 1);
    if (!__atomic_exchange_n(&said_untrusted, 1, __ATOMIC_RELAXED))
        progcache__file_log(fs, PROGCACHE_LOG_WARN,
                            "progcache: ignored the NVRTC record %s/%s/%s (mode %04o, owner uid "
                            "%u): someone other than uid %u could have written it; keys take "
                            "their NVRTC version from NVRTC itself, and the next compile "
                            "replaces the record",
                            fs->root, FILE_STATE_DIR, name, (unsigned)(st->st_mode & 07777),
                            (unsigned)st->st_uid, (unsigned)owner);
    return 0;
}

/* Append the file's bytes to out when record_trusted allows it. Plain
 * system calls, not the fs.c wrappers whose failures tests inject: the
 * records are read on the way to a lookup, and a record that cannot be
 * read only costs loading NVRTC; the injected failures are meant for the
 * entry's own calls. */
static int read_one(file_store *fs, int state, uid_t owner, progcache_buf *out)
{
    char name[32];
    name_of(name, owner);
    struct stat st;
    int fd = openat(state, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return PROGCACHE_OK;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return PROGCACHE_OK;
    }
    int rc = PROGCACHE_OK;
    size_t size = (size_t)st.st_size;
    if ((uint64_t)st.st_size <= PROGCACHE__NVRTC_RECORD_MAX &&
        record_trusted(fs, &st, owner, name) &&
        !(rc = progcache__buf_reserve(out, out->size + size + 1))) {
        ssize_t n = 0, got;
        while ((size_t)n < size &&
               ((got = read(fd, out->data + out->size + n, size - (size_t)n)) > 0 ||
                (got < 0 && errno == EINTR)))
            n += got > 0 ? got : 0;
        /* Only whole lines count: a file cut short loses its last one. */
        while (n > 0 && out->data[out->size + (size_t)n - 1] != '\n')
            n--;
        if (n > 0)
            progcache__buf_set_size(out, out->size + (size_t)n);
    }
    close(fd);
    return rc;
}

int progcache__file_nvrtc_read(progcache_file *file, progcache_buf *out)
{
    file_store *fs = file;
    out->size = 0;
    int state = openat(fs->root_fd, FILE_STATE_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (state < 0)
        return PROGCACHE_OK;
    int rc = read_one(fs, state, fs->euid, out);
    if (!rc && fs->euid != 0)
        rc = read_one(fs, state, 0, out);
    close(state);
    return rc;
}

/* Whether the identity of line (what follows its version) is among the
 * lines in buf. */
static int has_identity(const progcache_buf *buf, const char *line, size_t len)
{
    const char *id = memchr(line, ' ', len);
    if (!id)
        return 1; /* not a line of ours: dropped */
    size_t id_len = len - (size_t)(id - line);
    const char *p = (const char *)buf->data, *end = p + buf->size;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t l = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
        const char *sp = memchr(p, ' ', l);
        if (sp && (size_t)(p + l - sp) == id_len && !memcmp(sp, id, id_len))
            return 1;
        p += l;
    }
    return 0;
}

/* Add the whole lines of text to out, each identity once, up to max. */
static int merge(progcache_buf *out, size_t *count, const char *text, size_t len, size_t max)
{
    const char *p = text, *end = text + len;
    while (p < end && *count < max) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            break;
        size_t l = (size_t)(nl - p) + 1;
        if (!has_identity(out, p, l)) {
            int rc = progcache__buf_append(out, p, l);
            if (rc)
                return rc;
            ++*count;
        }
        p += l;
    }
    return PROGCACHE_OK;
}

int progcache__file_nvrtc_add(progcache_file *file, const char *lines, size_t len,
                              size_t max_lines)
{
    file_store *fs = file;
    if (!len || lines[len - 1] != '\n' || memchr(lines, '\0', len))
        return progcache__error(PROGCACHE_EINVAL, "an NVRTC record must be whole text lines");
    char name[32];
    name_of(name, fs->euid);
    int state = progcache__file_dir(fs, FILE_STATE_DIR);
    if (state < 0)
        return progcache__error_errno(PROGCACHE_EIO, errno, "cannot open %s/%s", fs->root,
                                      FILE_STATE_DIR);
    progcache_buf old = PROGCACHE_BUF_INIT, text = PROGCACHE_BUF_INIT;
    size_t count = 0;
    int rc = read_one(fs, state, fs->euid, &old);
    if (!rc)
        rc = merge(&text, &count, lines, len, max_lines);
    if (!rc)
        rc = merge(&text, &count, (const char *)old.data, old.size, max_lines);
    int same = !rc && text.size == old.size && !memcmp(text.data, old.data, old.size);
    if (!rc && !same && text.size <= PROGCACHE__NVRTC_RECORD_MAX &&
        progcache__fs_publish(state, name, "nvrtc-tmp-", text.data, text.size,
                              PROGCACHE__PUBLISH_REPLACE) != 0)
        rc = progcache__error_errno(PROGCACHE_EIO, errno, "cannot write %s/%s/%s", fs->root,
                                    FILE_STATE_DIR, name);
    progcache_buf_free(&old);
    progcache_buf_free(&text);
    close(state);
    return rc;
}

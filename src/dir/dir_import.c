/* What archives (src/archive/) need of a cache directory to import into
 * it, through dir/dir.h: the tier's refusal of a write, its bound on an
 * entry, its put path by an entry's name, a spool on its file system and
 * its log. Each is the tier's own call; archives never see the tier's
 * handle. */
#include "dir/dir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>

#include "store/file/file_store.h"

int progcache__dir_writable(progcache_file *file, const char *what)
{
    return (file->flags & PROGCACHE_FILE_READONLY) ? progcache__file_refuse_write(file, what)
                                                   : PROGCACHE_OK;
}

uint64_t progcache__dir_max_artifact_size(const progcache_file *file)
{
    return file->max_artifact_size;
}

int progcache__dir_put_entry(progcache_file *file, const char *rel, int shard, const void *data,
                             size_t size, const progcache_entry_meta *meta)
{
    return progcache__file_put_rel(file, rel, shard, data, size, meta);
}

int progcache__dir_tmpfile(progcache_file *file)
{
#ifdef O_TMPFILE
    return openat(file->root_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
#else
    (void)file;
    errno = EOPNOTSUPP;
    return -1;
#endif
}

void progcache__dir_log(progcache_file *file, int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    progcache__logv(file->log, file->log_ctx, level, fmt, ap);
    va_end(ap);
}

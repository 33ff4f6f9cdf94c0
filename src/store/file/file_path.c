/* How the file store reaches what is inside the cache directory
 * (docs/SECURITY.md, "No symbolic links are followed"): one way, here.
 *
 * A member of a team cache can put a symbolic link where the cache keeps a
 * directory (entries/<xx>, progcache/seals, progcache/tmp, ...). Followed,
 * such a link lets another member's `progcache clear` delete, or her put
 * write, wherever it points: an unlinkat(root, "progcache/seals/ab/<62
 * hex>") resolves every directory part of its path. So nothing below the
 * root is named by a path of more than one component: a directory is
 * opened without following links (progcache__fs_open_dir: openat2
 * RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH, or one O_NOFOLLOW | O_DIRECTORY
 * component at a time), and what is done in it names one component. A link
 * (or any non-directory) where a directory belongs is refused: counted
 * (links_refused), named once per handle and link, and never followed. */
#include "store/file/file_store.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fs.h"
#include "store/file/file_stats.h"

int progcache__file_refused(file_store *fs, const char *rel, int errnum, int last_is_dir)
{
    if (errnum != ELOOP && errnum != ENOTDIR)
        return 0;
    size_t len = 0;
    mode_t mode = 0;
    if (!progcache__fs_find_non_dir(fs->root_fd, rel, last_is_dir, &len, &mode))
        return 0;
    if (fs->stats)
        progcache__stats_add(fs->stats, PROGCACHE__LINKS_REFUSED, 1);
    else
        __atomic_add_fetch(&fs->links_refused, 1, __ATOMIC_RELAXED); /* at open */
    char target[PATH_MAX] = "";
    if (S_ISLNK(mode)) {
        char part[PATH_MAX];
        snprintf(part, sizeof part, "%.*s", (int)len, rel);
        ssize_t n = readlinkat(fs->root_fd, part, target, sizeof target - 1);
        target[n > 0 ? n : 0] = '\0';
    }
    /* Each link named once per handle (an eviction pass meets a linked
     * shard on every pass): a bit per path, by an FNV-1a hash of it. */
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)rel[i]) * 16777619u;
    uint64_t bit = 1ull << (h % 64);
    if (!(__atomic_fetch_or(&fs->links_named, bit, __ATOMIC_RELAXED) & bit))
        progcache__file_log(fs, PROGCACHE_LOG_WARN,
                            "progcache: %s/%.*s is %s%s%s where the cache keeps a directory: "
                            "refused and never followed (whatever needs it fails or misses "
                            "until it is removed; links_refused in progcache stats; "
                            "docs/SECURITY.md)",
                            fs->root, (int)len, rel, progcache__fs_type_name(mode),
                            target[0] ? " to " : "", target);
    errno = errnum;
    return 1;
}

void progcache__file_refused_report(file_store *fs)
{
    uint64_t n = __atomic_exchange_n(&fs->links_refused, 0, __ATOMIC_RELAXED);
    if (n)
        progcache__stats_add(fs->stats, PROGCACHE__LINKS_REFUSED, n);
}

int progcache__file_dir(file_store *fs, const char *rel)
{
    int fd = progcache__fs_open_dir(fs->root_fd, rel);
    if (fd < 0)
        (void)progcache__file_refused(fs, rel, errno, 1);
    return fd;
}

int progcache__file_parent(file_store *fs, const char *rel, const char **last)
{
    int fd = progcache__fs_open_parent(fs->root_fd, rel, last);
    if (fd < 0 && *last > rel) {
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%.*s", (int)(*last - rel - 1), rel);
        (void)progcache__file_refused(fs, dir, errno, 1);
    }
    return fd;
}

int progcache__file_dir_make(file_store *fs, const char *rel, mode_t mode, gid_t gid, int *made)
{
    return progcache__file_dir_make_ro(fs, rel, mode, gid, made,
                                       (fs->flags & PROGCACHE_FILE_READONLY) != 0);
}

int progcache__file_dir_make_ro(file_store *fs, const char *rel, mode_t mode, gid_t gid,
                                int *made, int readonly)
{
    *made = 0;
    int fd = progcache__fs_open_dir(fs->root_fd, rel);
    if (fd >= 0 || errno != ENOENT) {
        if (fd < 0)
            (void)progcache__file_refused(fs, rel, errno, 1);
        return fd;
    }
    *made = 1;
    if (readonly) {
        errno = EROFS; /* read-only, or another user's cache: nothing made there */
        return -1;
    }
    /* One component at a time, each made (when missing) in its parent held
     * open: a mkdirat of "a/b" would follow a link at a. The directories
     * on the way get the cache's mode, the last one mode and gid. */
    char part[PATH_MAX];
    size_t len = strlen(rel);
    if (len >= sizeof part) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(part, rel, len + 1);
    int cur = fcntl(fs->root_fd, F_DUPFD_CLOEXEC, 0);
    for (char *p = part; cur >= 0 && *p;) {
        char *slash = strchr(p, '/');
        int is_last = !slash;
        if (slash)
            *slash = '\0';
        int rc = progcache__fs_mkdirat_mode(
            cur, p, is_last ? mode : progcache__perm_dir_mode(&fs->perm),
            is_last ? gid : progcache__perm_new_gid(&fs->perm));
        int next = rc < 0 ? -1 : progcache__fs_open_dir(cur, p);
        int err = errno;
        close(cur);
        cur = next;
        if (cur < 0) {
            if (slash)
                *slash = '/';
            (void)progcache__file_refused(fs, part, err, 1);
            errno = err;
            return -1;
        }
        if (is_last)
            break;
        *slash = '/';
        p = slash + 1;
    }
    return cur;
}

int progcache__file_unlink(file_store *fs, const char *rel, int flags)
{
    const char *last;
    int dirfd = progcache__file_parent(fs, rel, &last);
    if (dirfd < 0)
        return -1;
    int rc = progcache__fs_unlinkat(dirfd, last, flags);
    int saved = errno;
    close(dirfd);
    errno = saved;
    return rc;
}

int progcache__file_lstat(file_store *fs, const char *rel, struct stat *st)
{
    const char *last;
    int dirfd = progcache__file_parent(fs, rel, &last);
    if (dirfd < 0)
        return -1;
    int rc = fstatat(dirfd, last, st, AT_SYMLINK_NOFOLLOW);
    int saved = errno;
    close(dirfd);
    errno = saved;
    return rc;
}

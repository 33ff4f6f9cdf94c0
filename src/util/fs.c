/* File-system calls with EINTR handling, symlink-safe opening and
 * test-only fault injection. */
#include "fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__linux__)
#include <linux/openat2.h>
#endif

#include "error.h" /* PROGCACHE_HOT */

static _Thread_local struct {
    long countdown[PROGCACHE_FS_OP_COUNT];
    int errnum[PROGCACHE_FS_OP_COUNT];
} faults;

void progcache__fs_fail(progcache__fs_op op, long nth, int errnum)
{
    faults.countdown[op] = nth;
    faults.errnum[op] = errnum;
}

void progcache__fs_fail_reset(void) { memset(&faults, 0, sizeof faults); }

/* True (with errno set) when an injected failure fires for this call. */
static int injected(progcache__fs_op op)
{
    if (faults.countdown[op] <= 0 || --faults.countdown[op] != 0)
        return 0;
    errno = faults.errnum[op];
    return 1;
}

static int force_walk;

void progcache__fs_force_walk(int on) { __atomic_store_n(&force_walk, on, __ATOMIC_RELAXED); }

/* Open the directory that holds path's last component, beneath dirfd, one
 * component at a time, each O_DIRECTORY | O_NOFOLLOW: a symbolic link (or
 * anything but a directory) on the way fails with ELOOP or ENOTDIR, an
 * absolute path or ".." with EXDEV, as openat2's RESOLVE_NO_SYMLINKS |
 * RESOLVE_BENEATH do. *last points into path. The caller closes the fd (a
 * duplicate of dirfd for a path of one component). */
static int walk_parent(int dirfd, const char *path, const char **last)
{
    if (path[0] == '/') {
        errno = EXDEV;
        return -1;
    }
    int cur = dirfd == AT_FDCWD ? open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                                : fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
    const char *p = path;
    for (const char *slash; cur >= 0 && (slash = strchr(p, '/')) != NULL; p = slash + 1) {
        size_t n = (size_t)(slash - p);
        char comp[NAME_MAX + 1];
        if (n == 0 || (n == 1 && p[0] == '.'))
            continue;
        int err = n > NAME_MAX ? ENAMETOOLONG : (n == 2 && !memcmp(p, "..", 2)) ? EXDEV : 0;
        int next = -1;
        if (!err) {
            memcpy(comp, p, n);
            comp[n] = '\0';
            do
                next = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC |
                                             O_NONBLOCK | O_NOCTTY);
            while (next < 0 && errno == EINTR);
            err = next < 0 ? errno : 0;
        }
        close(cur);
        cur = next;
        errno = err;
    }
    if (cur >= 0 && !strcmp(p, "..")) {
        close(cur);
        cur = -1;
        errno = EXDEV;
    }
    *last = p;
    return cur;
}

PROGCACHE_HOT
int progcache__fs_open_beneath(int dirfd, const char *path, int flags, mode_t mode)
{
    if (injected(PROGCACHE_FS_OPEN))
        return -1;
    flags |= O_CLOEXEC | O_NONBLOCK | O_NOCTTY;
    int fd;
#if defined(__linux__) && defined(SYS_openat2)
    /* openat2 refuses a symbolic link in any component, so a hostile link
     * in place of a shard directory or of tmp/ is never followed. Checked
     * once per process: ENOSYS on older kernels. */
    static int no_openat2;
    if (!__atomic_load_n(&no_openat2, __ATOMIC_RELAXED) &&
        !__atomic_load_n(&force_walk, __ATOMIC_RELAXED)) {
        struct open_how how;
        memset(&how, 0, sizeof how);
        how.flags = (uint64_t)flags;
        how.mode = (flags & O_CREAT) ? mode : 0;
        how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH;
        do
            fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
        while (fd < 0 && errno == EINTR);
        if (fd >= 0 || (errno != ENOSYS && errno != EPERM))
            return fd;
        if (errno == ENOSYS)
            __atomic_store_n(&no_openat2, 1, __ATOMIC_RELAXED);
    }
#endif
    /* No openat2 (Linux before 5.6, a seccomp filter that refuses it): the
     * directories on the way are opened one at a time, none followed, and
     * the last component with O_NOFOLLOW. */
    const char *last;
    int parent = walk_parent(dirfd, path, &last);
    if (parent < 0)
        return -1;
    do
        fd = openat(parent, last, flags | O_NOFOLLOW, mode);
    while (fd < 0 && errno == EINTR);
    int saved = errno;
    close(parent);
    errno = saved;
    return fd;
}

PROGCACHE_HOT
int progcache__fs_open_regular(int dirfd, const char *path, int flags, mode_t mode,
                               struct stat *st)
{
    st->st_mode = 0;
    int fd = progcache__fs_open_beneath(dirfd, path, flags, mode);
    if (fd < 0) {
        /* What open refuses outright: a socket (ENXIO), a FIFO opened for
         * writing with no reader (ENXIO), a directory opened for writing
         * (EISDIR), a device node without a driver (ENODEV). Say what it
         * is rather than pass on an errno that names another cause. */
        int saved = errno;
        if (saved != ENXIO && saved != EISDIR && saved != ENODEV)
            return -1;
        /* Told in its directory held open: nothing on the way followed. */
        const char *last;
        int parent = progcache__fs_open_parent(dirfd, path, &last);
        if (parent < 0 || fstatat(parent, last, st, AT_SYMLINK_NOFOLLOW) != 0)
            st->st_mode = 0;
        if (parent >= 0)
            close(parent);
        if (S_ISREG(st->st_mode)) {
            errno = saved;
            return -1;
        }
        errno = PROGCACHE__FS_ENOTREG;
        return -1;
    }
    if (fstat(fd, st) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    if (!S_ISREG(st->st_mode)) {
        close(fd);
        errno = PROGCACHE__FS_ENOTREG;
        return -1;
    }
    return fd;
}

const char *progcache__fs_type_name(mode_t mode)
{
    switch (mode & S_IFMT) {
    case S_IFIFO: return "a FIFO";
    case S_IFSOCK: return "a socket";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFDIR: return "a directory";
    case S_IFLNK: return "a symbolic link";
    case S_IFREG: return "a regular file";
    default: return "not a regular file";
    }
}

unsigned long long progcache__fs_size_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_FSIZE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return UINT64_MAX;
    return (unsigned long long)rl.rlim_cur;
}

const char *progcache__fs_strerror(char *buf, size_t len, int errnum)
{
    unsigned long long limit = progcache__fs_size_limit();
    if (errnum == EFBIG && limit != UINT64_MAX)
        snprintf(buf, len, "%s: the file size limit (ulimit -f) of %llu bytes is too small "
                 "(raise it)",
                 strerror(errnum), limit);
    else
        snprintf(buf, len, "%s", strerror(errnum));
    return buf;
}

/* Whether writing len more bytes at fd's offset would cross the file size
 * limit. One getrlimit when there is no limit (the usual case); the offset
 * is asked for only under a limit. Not a regular file (lseek fails): the
 * limit does not apply. */
int progcache__fs_over_size_limit(int fd, size_t len)
{
    unsigned long long limit = progcache__fs_size_limit();
    if (limit == UINT64_MAX)
        return 0;
    off_t pos = lseek(fd, 0, SEEK_CUR);
    if (pos < 0)
        return 0;
    return (unsigned long long)pos > limit || len > limit - (unsigned long long)pos;
}

int progcache__fs_open_dir(int dirfd, const char *path)
{
    return progcache__fs_open_beneath(dirfd, path, O_RDONLY | O_DIRECTORY, 0);
}

int progcache__fs_open_parent(int dirfd, const char *path, const char **last)
{
    const char *slash = strrchr(path, '/');
    *last = slash ? slash + 1 : path;
    if (!slash)
        return dirfd == AT_FDCWD ? open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                                 : fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
    char dir[PATH_MAX];
    if ((size_t)(slash - path) >= sizeof dir) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(dir, path, (size_t)(slash - path));
    dir[slash - path] = '\0';
    return progcache__fs_open_dir(dirfd, dir[0] ? dir : "/");
}

int progcache__fs_find_non_dir(int dirfd, const char *path, int last_is_dir, size_t *len,
                               mode_t *mode)
{
    int cur = dirfd == AT_FDCWD ? open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                                : fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
    int found = 0;
    const char *p = path;
    while (cur >= 0 && !found && *p) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        char comp[NAME_MAX + 1];
        struct stat st;
        if (n > NAME_MAX || (!slash && !last_is_dir))
            break;
        memcpy(comp, p, n);
        comp[n] = '\0';
        if (n && strcmp(comp, ".")) {
            if (fstatat(cur, comp, &st, AT_SYMLINK_NOFOLLOW) != 0)
                break; /* missing: nothing refused */
            if (!S_ISDIR(st.st_mode)) {
                found = 1;
                *len = (size_t)(p - path) + n;
                *mode = st.st_mode;
                break;
            }
            int next = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC |
                                             O_NONBLOCK | O_NOCTTY);
            close(cur);
            cur = next;
        }
        p = slash ? slash + 1 : p + n;
    }
    if (cur >= 0)
        close(cur);
    return found;
}

PROGCACHE_HOT
ssize_t progcache__fs_read_full(int fd, void *buf, size_t len)
{
    if (injected(PROGCACHE_FS_READ))
        return -1;
    size_t done = 0;
    while (done < len) {
        ssize_t n = read(fd, (char *)buf + done, len - done);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (n == 0)
            break;
        done += (size_t)n;
    }
    return (ssize_t)done;
}

int progcache__fs_write_full(int fd, const void *buf, size_t len)
{
    if (injected(PROGCACHE_FS_WRITE))
        return -1;
    if (progcache__fs_over_size_limit(fd, len)) {
        errno = EFBIG;
        return -1;
    }
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(fd, (const char *)buf + done, len - done);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        done += (size_t)n;
    }
    return 0;
}

int progcache__fs_fsync(int fd)
{
    if (injected(PROGCACHE_FS_FSYNC))
        return -1;
    int rc;
    do
        rc = fsync(fd);
    while (rc < 0 && errno == EINTR);
    return rc;
}

int progcache__fs_renameat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath)
{
    if (injected(PROGCACHE_FS_RENAME))
        return -1;
    return renameat(olddirfd, oldpath, newdirfd, newpath);
}

int progcache__fs_linkat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath)
{
    if (injected(PROGCACHE_FS_RENAME))
        return -1;
    return linkat(olddirfd, oldpath, newdirfd, newpath, 0);
}

int progcache__fs_mkdirat(int dirfd, const char *path, mode_t mode)
{
    if (injected(PROGCACHE_FS_MKDIR))
        return -1;
    if (mkdirat(dirfd, path, mode) == 0 || errno == EEXIST)
        return 0;
    return -1;
}

int progcache__fs_mkdirat_mode(int dirfd, const char *path, mode_t mode, gid_t gid)
{
    if (injected(PROGCACHE_FS_MKDIR))
        return -1;
    /* Made owner-only (the umask can only take bits away from 0700), then
     * given its group and its mode through a descriptor: nobody else can
     * use it before it has the mode it is meant to have, whatever the
     * umask, and no umask() call (process-wide) is needed. */
    if (mkdirat(dirfd, path, 0700) != 0)
        return errno == EEXIST ? 1 : -1;
    /* Not beneath dirfd: mkdir -p passes absolute paths. The last
     * component is the directory just made, never followed if replaced. */
    int fd = openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int ok = (gid == (gid_t)-1 || fchown(fd, (uid_t)-1, gid) == 0) && fchmod(fd, mode) == 0;
    int saved = errno;
    close(fd);
    errno = saved;
    return ok ? 0 : -1;
}

int progcache__fs_unlinkat(int dirfd, const char *path, int flags)
{
    if (injected(PROGCACHE_FS_UNLINK))
        return -1;
    return unlinkat(dirfd, path, flags);
}

int progcache__fs_flock(int fd, int operation)
{
    if (injected(PROGCACHE_FS_FLOCK))
        return -1;
    int rc;
    do
        rc = flock(fd, operation);
    while (rc < 0 && errno == EINTR);
    return rc;
}

int progcache__fs_lock_unsupported(int errnum)
{
    return errnum != EWOULDBLOCK && errnum != EAGAIN && errnum != EACCES && errnum != EINTR;
}

int progcache__fs_lock_warn_once(void)
{
    static int warned;
    return !__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED);
}

/* Temp names need to be unique, not secret: O_EXCL catches collisions.
 * The generator is reseeded from the kernel in every new process: a child
 * forked from a process that already drew names would otherwise draw the
 * same ones as its parent and its siblings, and collide with every temp
 * file a crashed sibling left behind. */
static uint64_t next_random(void)
{
    static _Thread_local uint64_t state;
    static _Thread_local pid_t state_pid;
    pid_t pid = getpid();
    if (!state || state_pid != pid) {
        uint64_t seed = 0;
        if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != (ssize_t)sizeof seed) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            seed = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20);
        }
        state = seed ^ ((uint64_t)pid << 32) ^ (uint64_t)(uintptr_t)&state;
        state_pid = pid;
    }
    /* splitmix64 step */
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int create_temp(int dirfd, const char *prefix, mode_t mode, int exact, char *name,
                       size_t name_size)
{
    for (int attempt = 0; attempt < 100; attempt++) {
        snprintf(name, name_size, "%s%016llx", prefix, (unsigned long long)next_random());
        int fd = progcache__fs_open_beneath(dirfd, name, O_WRONLY | O_CREAT | O_EXCL, mode);
        /* The umask may have taken bits the file needs (a group cache's
         * 0660); it never adds any, so the mode set here is only ever a
         * widening to what was asked, on a file nobody else has open. */
        if (fd >= 0 && exact && fchmod(fd, mode) != 0) {
            int saved = errno;
            close(fd);
            (void)unlinkat(dirfd, name, 0);
            errno = saved;
            return -1;
        }
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    errno = EEXIST;
    return -1;
}

int progcache__fs_create_temp(int dirfd, const char *prefix, mode_t mode, char *name,
                              size_t name_size)
{
    return create_temp(dirfd, prefix, mode, 0, name, name_size);
}

int progcache__fs_create_temp_exact(int dirfd, const char *prefix, mode_t mode, char *name,
                                    size_t name_size)
{
    return create_temp(dirfd, prefix, mode, 1, name, name_size);
}

int progcache__fs_rename_aside(int olddirfd, const char *oldpath, int newdirfd,
                               const char *prefix, char *name, size_t name_size)
{
    for (int attempt = 0; attempt < 100; attempt++) {
        snprintf(name, name_size, "%s%016llx", prefix, (unsigned long long)next_random());
        if (injected(PROGCACHE_FS_RENAME))
            return -1;
        if (renameat2(olddirfd, oldpath, newdirfd, name, RENAME_NOREPLACE) == 0)
            return 0;
        if (errno == EINVAL || errno == ENOSYS) {
            /* No RENAME_NOREPLACE here: link never replaces either. */
            if (linkat(olddirfd, oldpath, newdirfd, name, 0) == 0)
                return unlinkat(olddirfd, oldpath, 0);
        }
        if (errno != EEXIST)
            return -1;
    }
    errno = EEXIST;
    return -1;
}

int progcache__fs_mkdir_p(const char *path, mode_t mode, gid_t gid, progcache__fs_parent_fn ok,
                          void *ctx)
{
    char buf[PATH_MAX];
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof buf) {
        errno = len ? ENAMETOOLONG : ENOENT;
        return -1;
    }
    memcpy(buf, path, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (buf[i] != '/' && buf[i] != '\0')
            continue;
        char saved = buf[i];
        buf[i] = '\0';
        struct stat st;
        if (fstatat(AT_FDCWD, buf, &st, 0) != 0) {
            if (errno != ENOENT)
                return -1;
            /* Missing: made in its parent only when the caller allows that
             * parent (who owns it). */
            char *slash = strrchr(buf, '/');
            char parent[PATH_MAX];
            if (!slash)
                snprintf(parent, sizeof parent, ".");
            else if (slash == buf)
                snprintf(parent, sizeof parent, "/");
            else
                snprintf(parent, sizeof parent, "%.*s", (int)(slash - buf), buf);
            struct stat pst;
            if (ok && (fstatat(AT_FDCWD, parent, &pst, 0) != 0 || !ok(ctx, parent, &pst)))
                return -1;
            /* An existing component that is not a directory is reported by
             * the open that follows; here only real failures stop us. */
            if (progcache__fs_mkdirat_mode(AT_FDCWD, buf, mode, gid) < 0 && errno != EEXIST)
                return -1;
        }
        buf[i] = saved;
    }
    return 0;
}

int progcache__fs_publish(int dirfd, const char *name, const char *temp_prefix, const void *data,
                          size_t size, int flags)
{
    char temp[64];
    int fd = progcache__fs_create_temp_exact(dirfd, temp_prefix,
                                             (flags & PROGCACHE__PUBLISH_GROUP) ? 0660 : 0600,
                                             temp, sizeof temp);
    if (fd < 0)
        return -1;
    int ok = progcache__fs_write_full(fd, data, size) == 0;
    if (ok && (flags & PROGCACHE__PUBLISH_FSYNC))
        ok = progcache__fs_fsync(fd) == 0;
    int saved = errno;
    close(fd);
    errno = saved;
    if (ok) {
        if (flags & PROGCACHE__PUBLISH_REPLACE)
            ok = progcache__fs_renameat(dirfd, temp, dirfd, name) == 0;
        else
            ok = progcache__fs_linkat(dirfd, temp, dirfd, name) == 0 || errno == EEXIST;
    }
    saved = errno;
    (void)unlinkat(dirfd, temp, 0); /* after a rename: already gone */
    if (ok && (flags & PROGCACHE__PUBLISH_FSYNC))
        ok = progcache__fs_fsync(dirfd) == 0;
    else
        errno = saved;
    return ok ? 0 : -1;
}

int progcache__fs_each_name(int dirfd, progcache__fs_name_fn fn, void *ctx)
{
    DIR *dir = fdopendir(dirfd);
    if (!dir) {
        close(dirfd);
        return 0;
    }
    int rc = 0;
    struct dirent *e;
    while (!rc && (e = readdir(dir)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        rc = fn(ctx, dirfd, e->d_name, e->d_type);
    }
    closedir(dir); /* closes dirfd */
    return rc;
}

/* Internal: the file-system calls the stores make, in one place, so tests
 * can make the Nth call of a kind fail with a chosen errno (the way
 * sqlite's test_syscall.c does), and so every caller gets EINTR handling
 * and symlink-safe directory opening for free. */
#ifndef PROGCACHE_UTIL_FS_H
#define PROGCACHE_UTIL_FS_H

#include <stddef.h>
#include <sys/stat.h>
#include <errno.h>
#include <sys/types.h>

typedef enum progcache__fs_op {
    PROGCACHE_FS_OPEN = 0, /* openat/openat2, file and directory */
    PROGCACHE_FS_READ,
    PROGCACHE_FS_WRITE,
    PROGCACHE_FS_FSYNC,
    PROGCACHE_FS_RENAME, /* renameat and linkat */
    PROGCACHE_FS_MKDIR,
    PROGCACHE_FS_UNLINK,
    PROGCACHE_FS_FLOCK,
    PROGCACHE_FS_OP_COUNT
} progcache__fs_op;

/* Test hook: make the nth call of op from now on this thread (and in
 * children forked after the call) fail with errnum; nth 0 disarms it. */
void progcache__fs_fail(progcache__fs_op op, long nth, int errnum);
/* Disarm every injected failure. */
void progcache__fs_fail_reset(void);

/* openat that never follows a symbolic link in any component of path and
 * never leaves the tree under dirfd (openat2 RESOLVE_NO_SYMLINKS |
 * RESOLVE_BENEATH where the kernel has it, else O_NOFOLLOW on the last
 * component), and never blocks: O_NONBLOCK, so a FIFO planted where a file
 * belongs opens at once (and reads find nothing) instead of waiting for a
 * writer forever, and O_NOCTTY, so a terminal never becomes the process's
 * controlling one. O_NONBLOCK changes nothing for the regular files and
 * directories progcache reads and writes (open(2): "no effect for regular
 * files"), so it is left on. Returns an fd or -1 with errno. */
int progcache__fs_open_beneath(int dirfd, const char *path, int flags, mode_t mode);

/* The errno progcache__fs_open_regular sets for a path that names something
 * other than a regular file. Callers test for it and say what the thing is
 * (progcache__fs_type_name); strerror() of it means nothing here. */
#ifdef EFTYPE
#define PROGCACHE__FS_ENOTREG EFTYPE
#else
#define PROGCACHE__FS_ENOTREG EMEDIUMTYPE
#endif

/* progcache__fs_open_beneath for a file that must be a regular file: the
 * open never blocks, and *st is filled from fstat. A FIFO, socket, device
 * node or directory at path gives -1 with errno PROGCACHE__FS_ENOTREG (and
 * st->st_mode says which; 0 when it could not be told), never an fd. */
int progcache__fs_open_regular(int dirfd, const char *path, int flags, mode_t mode,
                               struct stat *st);

/* "a FIFO", "a socket", "a character device", "a block device", "a
 * directory", "a symbolic link", "a regular file", or "not a regular file"
 * for anything else: for messages. */
const char *progcache__fs_type_name(mode_t mode);

/* strerror(errnum), except for EFBIG under a file size limit: "file size
 * limit (ulimit -f) of N bytes reached", the cause a user can act on.
 * Written into buf (len bytes); returns buf. */
const char *progcache__fs_strerror(char *buf, size_t len, int errnum);

/* The process's file size limit (RLIMIT_FSIZE, `ulimit -f`) in bytes, or
 * UINT64_MAX when there is none. */
unsigned long long progcache__fs_size_limit(void);

/* The same for a directory: O_RDONLY | O_DIRECTORY | O_CLOEXEC. A
 * symbolic link or any non-directory at any component fails (ELOOP or
 * ENOTDIR); nothing is followed. */
int progcache__fs_open_dir(int dirfd, const char *path);

/* The directory holding path's last component, opened as
 * progcache__fs_open_dir does (a duplicate of dirfd for a path of one
 * component), with *last pointing at that component in path: the *at()
 * call that follows (unlinkat, fstatat with AT_SYMLINK_NOFOLLOW, renameat)
 * names one component and so follows nothing. An fd the caller closes, or
 * -1 with errno. */
int progcache__fs_open_parent(int dirfd, const char *path, const char **last);

/* After an open beneath dirfd failed (ELOOP, ENOTDIR): whether something
 * other than a directory stands where path needs one (every component but
 * the last, and the last too with last_is_dir). 1 with *len the length of
 * the path up to that component and *mode its lstat mode; 0 when every
 * such component that exists is a directory. Follows nothing. */
int progcache__fs_find_non_dir(int dirfd, const char *path, int last_is_dir, size_t *len,
                               mode_t *mode);

/* Test hook: 1 makes progcache__fs_open_beneath take the way it takes
 * where the kernel has no openat2 (one component at a time), 0 restores. */
void progcache__fs_force_walk(int on);

/* Read exactly len bytes (short only at end of file); returns bytes read
 * or -1 with errno. */
ssize_t progcache__fs_read_full(int fd, void *buf, size_t len);
/* Write all len bytes; 0 or -1 with errno. A write that would take a
 * regular file past the file size limit (RLIMIT_FSIZE, `ulimit -f`) is not
 * attempted and fails with EFBIG: the kernel would kill the process with
 * SIGXFSZ, a signal a library's caller never asked for, and a library
 * must not change signal dispositions to avoid it. */
int progcache__fs_write_full(int fd, const void *buf, size_t len);
int progcache__fs_fsync(int fd);
/* 1 when writing len more bytes at fd's offset would cross the file size
 * limit (ulimit -f), where the kernel would kill the process with SIGXFSZ:
 * the caller fails the write with EFBIG instead. */
int progcache__fs_over_size_limit(int fd, size_t len);
int progcache__fs_renameat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath);
int progcache__fs_linkat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath);
int progcache__fs_mkdirat(int dirfd, const char *path, mode_t mode); /* EEXIST is success */
/* mkdirat that gives the new directory exactly mode (setgid included) and,
 * unless gid is (gid_t)-1, that group, whatever the umask: it is made 0700
 * and then fchown'ed and fchmod'ed through a descriptor. 0 when made, 1
 * when it existed (left as it is), -1 with errno. */
int progcache__fs_mkdirat_mode(int dirfd, const char *path, mode_t mode, gid_t gid);
int progcache__fs_unlinkat(int dirfd, const char *path, int flags);
int progcache__fs_flock(int fd, int operation);
/* Whether errnum, from flock or fcntl's F_SETLK/F_OFD_SETLK, says that
 * the lock cannot be had at all (ENOLCK: NFS without a lock manager;
 * EOPNOTSUPP, ENOSYS, EINVAL: some FUSE and network file systems; or any
 * other error, EIO included), as opposed to another process holding it
 * (EWOULDBLOCK/EAGAIN, EACCES): the caller then goes on without the lock,
 * and says so, rather than skip its work silently. */
int progcache__fs_lock_unsupported(int errnum);
/* 1 the first time a process calls it, 0 after: a file system that
 * cannot lock fails every lock (the size accounting's, single-flight's),
 * and the user hears of it once per process, from whichever comes first,
 * in PROGCACHE__FS_NO_LOCKS_FMT's words (arguments: the cache directory,
 * strerror, the errno's name). */
int progcache__fs_lock_warn_once(void);
#define PROGCACHE__FS_NO_LOCKS_FMT                                                              \
    "cannot lock files in %s/progcache: %s (%s): the file system refused the lock (NFS "        \
    "without a lock manager, some FUSE file systems); the size cap is kept by measuring the "   \
    "directory "                                                                                 \
    "itself after a put over it, evictions are not coordinated across processes, and "          \
    "processes missing the same key each compile it (said once per process; lock_failures in "  \
    "progcache stats)"

/* Create a new file "<prefix><16 random hex>" in dirfd with O_EXCL and
 * the given mode less the umask (a file for the user, such as an export);
 * writes the name into name (prefix length + 17 bytes). */
int progcache__fs_create_temp(int dirfd, const char *prefix, mode_t mode, char *name,
                              size_t name_size);
/* The same with exactly the given mode, whatever the umask (fchmod after
 * the create): the cache's own files (docs/SHARED.md). */
int progcache__fs_create_temp_exact(int dirfd, const char *prefix, mode_t mode, char *name,
                                    size_t name_size);

/* Rename oldpath to a new name "<prefix><16 random hex>" in newdirfd that
 * did not exist before (RENAME_NOREPLACE; link + unlink where the file
 * system lacks it); the name is written into name. 0 or -1 with errno. */
int progcache__fs_rename_aside(int olddirfd, const char *oldpath, int newdirfd,
                               const char *prefix, char *name, size_t name_size);

/* Publish a small file: write data under a fresh temp name made of
 * temp_prefix and 16 hex digits in dirfd, then link it to name (never over
 * what another process published first: an existing name counts as
 * success) or, with PROGCACHE__PUBLISH_REPLACE, rename it over name. With
 * PROGCACHE__PUBLISH_FSYNC the file is fsync'ed before it takes the name
 * and the directory after, so the new file survives a power loss whole.
 * The temp name is gone afterwards either way. 0 or -1 with errno. For
 * progcache's own files (state, stats, config), which every process must
 * see whole or not at all. */
#define PROGCACHE__PUBLISH_REPLACE 0x1
#define PROGCACHE__PUBLISH_FSYNC 0x2
/* The file is made 0660 (a group-shared cache's state) instead of 0600,
 * whatever the umask. */
#define PROGCACHE__PUBLISH_GROUP 0x4
int progcache__fs_publish(int dirfd, const char *name, const char *temp_prefix, const void *data,
                          size_t size, int flags);

/* Call fn for each name in the directory open as dirfd but "." and "..",
 * with its d_type (DT_UNKNOWN on file systems that do not say). Takes
 * dirfd over and closes it. fn returns 0 to go on, non-zero to stop (which
 * is returned). A directory that cannot be read gives 0. */
typedef int (*progcache__fs_name_fn)(void *ctx, int dirfd, const char *name, unsigned char type);
int progcache__fs_each_name(int dirfd, progcache__fs_name_fn fn, void *ctx);

/* mkdir -p for an absolute or relative path: every directory it makes gets
 * mode and gid as progcache__fs_mkdirat_mode gives them. Before making one,
 * ok (unless NULL) is asked about its existing parent (path and stat); a
 * 0 stops there with errno as ok set it. 0 or -1 with errno. */
typedef int (*progcache__fs_parent_fn)(void *ctx, const char *parent, const struct stat *st);
int progcache__fs_mkdir_p(const char *path, mode_t mode, gid_t gid, progcache__fs_parent_fn ok,
                          void *ctx);

#endif

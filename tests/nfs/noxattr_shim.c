/* LD_PRELOAD shim: a file system without user extended attributes, on any
 * directory (tests/nfs/; the bench's forced sidecar case). Every xattr call
 * fails with ENOTSUP, as on sshfs, NFS before 4.2 and tmpfs before 6.6. */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/types.h>
#include <sys/xattr.h>

#define NO_XATTR(ret, name, ...)                                                               \
    ret name(__VA_ARGS__)                                                                      \
    {                                                                                          \
        errno = ENOTSUP;                                                                       \
        return -1;                                                                             \
    }

NO_XATTR(ssize_t, getxattr, const char *p, const char *n, void *v, size_t s)
NO_XATTR(ssize_t, lgetxattr, const char *p, const char *n, void *v, size_t s)
NO_XATTR(ssize_t, fgetxattr, int fd, const char *n, void *v, size_t s)
NO_XATTR(int, setxattr, const char *p, const char *n, const void *v, size_t s, int f)
NO_XATTR(int, lsetxattr, const char *p, const char *n, const void *v, size_t s, int f)
NO_XATTR(int, fsetxattr, int fd, const char *n, const void *v, size_t s, int f)
NO_XATTR(ssize_t, listxattr, const char *p, char *l, size_t s)
NO_XATTR(ssize_t, llistxattr, const char *p, char *l, size_t s)
NO_XATTR(ssize_t, flistxattr, int fd, char *l, size_t s)
NO_XATTR(int, removexattr, const char *p, const char *n)
NO_XATTR(int, lremovexattr, const char *p, const char *n)
NO_XATTR(int, fremovexattr, int fd, const char *n)

/* LD_PRELOAD shim for test_lock_fail: a file system that cannot lock.
 * flock and the fcntl lock commands (F_SETLK, F_SETLKW, F_OFD_SETLK,
 * F_OFD_SETLKW) fail with the errno named by PROGCACHE_TEST_LOCK_ERRNO
 * (ENOLCK, EOPNOTSUPP or ENOSYS), as on NFS without a lock manager or on
 * some FUSE file systems; every other call goes to libc. Without the
 * variable the shim changes nothing. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>

static int chosen_errno(void)
{
    const char *name = getenv("PROGCACHE_TEST_LOCK_ERRNO");
    if (!name)
        return 0;
    if (!strcmp(name, "ENOLCK"))
        return ENOLCK;
    if (!strcmp(name, "EOPNOTSUPP"))
        return EOPNOTSUPP;
    if (!strcmp(name, "ENOSYS"))
        return ENOSYS;
    return 0;
}

int flock(int fd, int operation)
{
    int err = chosen_errno();
    if (err && !(operation & LOCK_UN)) {
        errno = err;
        return -1;
    }
    int (*real)(int, int) = (int (*)(int, int))dlsym(RTLD_NEXT, "flock");
    return real(fd, operation);
}

static int is_lock_cmd(int cmd)
{
    return cmd == F_SETLK || cmd == F_SETLKW || cmd == F_OFD_SETLK || cmd == F_OFD_SETLKW;
}

static int forward(const char *symbol, int fd, int cmd, uintptr_t arg)
{
    int err = chosen_errno();
    if (err && is_lock_cmd(cmd)) {
        errno = err;
        return -1;
    }
    int (*real)(int, int, ...) = (int (*)(int, int, ...))dlsym(RTLD_NEXT, symbol);
    return real(fd, cmd, arg);
}

/* Every fcntl command takes at most one argument, an int or a pointer:
 * passed on as a word. fcntl and fcntl64 alike (glibc may call either). */
#define LOCK_FAIL_FCNTL(name)                                                  \
    int name(int fd, int cmd, ...)                                             \
    {                                                                          \
        va_list ap;                                                            \
        va_start(ap, cmd);                                                     \
        uintptr_t arg = va_arg(ap, uintptr_t);                                 \
        va_end(ap);                                                            \
        return forward(#name, fd, cmd, arg);                                   \
    }

LOCK_FAIL_FCNTL(fcntl)
LOCK_FAIL_FCNTL(fcntl64)

/* Opening a file trusted by its path, checked on its descriptors
 * (trusted_path.h). */
#include "trusted_path.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define MAX_LINKS 40
#define TODO_SIZE (2 * PATH_MAX)

typedef struct walk {
    char todo[TODO_SIZE]; /* what is left of the path */
    char where[PATH_MAX]; /* the directory reached, for messages ("" is /) */
    int dir;              /* its descriptor (O_PATH) */
    int loose;            /* it is sticky and others may write it */
    uid_t me;
    char *why;
    size_t why_len;
} walk;

static int trusted_owner(const walk *w, uid_t uid)
{
    return uid == 0 || uid == w->me;
}

static const char *shown(const char *where)
{
    return *where ? where : "/";
}

static int fail(walk *w, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(walk *w, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->why, w->why_len, fmt, ap);
    va_end(ap);
    if (w->dir >= 0)
        close(w->dir);
    w->dir = -1;
    errno = err;
    return -1;
}

/* Whether the directory at where (stat st) may be passed; sets w->loose
 * for what comes next. */
static int check_dir(walk *w, const struct stat *st, const char *where)
{
    if (!trusted_owner(w, st->st_uid))
        return fail(w, EPERM, "the directory %s is owned by uid %u, neither root nor this user",
                    shown(where), (unsigned)st->st_uid);
    w->loose = 0;
    if (st->st_mode & (S_IWGRP | S_IWOTH)) {
        if (!(st->st_mode & S_ISVTX))
            return fail(w, EPERM, "the directory %s is writable by other users (mode %04o)",
                        shown(where), (unsigned)(st->st_mode & 07777));
        w->loose = 1; /* as /tmp: only what root or this user owns in it is safe */
    }
    return 0;
}

static int go_to_root(walk *w)
{
    struct stat st;
    if (w->dir >= 0)
        close(w->dir);
    w->where[0] = '\0';
    w->dir = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (w->dir < 0 || fstat(w->dir, &st) != 0)
        return fail(w, errno, "/: %s", strerror(errno));
    return check_dir(w, &st, "");
}

/* where + "/" + comp (or its parent, for ".."), into out. */
static void step_name(char *out, size_t size, const char *where, const char *comp)
{
    if (strcmp(comp, "..") == 0) {
        snprintf(out, size, "%s", where);
        char *slash = strrchr(out, '/');
        if (slash)
            *slash = '\0';
    } else if ((size_t)snprintf(out, size, "%s/", where) < size) {
        size_t n = strlen(out);
        snprintf(out + n, size - n, "%s", comp); /* a name too long is cut: messages only */
    }
}

int progcache__trusted_open(int *fd, struct stat *st, const char *path, unsigned int flags,
                            char *why, size_t why_len)
{
    walk w;
    w.dir = -1;
    w.me = geteuid();
    w.why = why;
    w.why_len = why_len;
    *fd = -1;
    if (!path || !*path)
        return fail(&w, EINVAL, "the path is empty");
    char cwd[PATH_MAX] = "";
    if (path[0] != '/' && !getcwd(cwd, sizeof cwd))
        return fail(&w, errno, "%s: the working directory: %s", path, strerror(errno));
    if ((size_t)snprintf(w.todo, sizeof w.todo, "%s/%s", cwd, path) >= sizeof w.todo)
        return fail(&w, ENAMETOOLONG, "%s: %s", path, strerror(ENAMETOOLONG));
    if (go_to_root(&w))
        return -1;
    int links = 0;
    char *p = w.todo;
    for (;;) {
        while (*p == '/')
            p++;
        char *end = p + strcspn(p, "/");
        char *next = end;
        while (*next == '/')
            next++;
        int last = *next == '\0';
        char comp[NAME_MAX + 1], name[PATH_MAX];
        if ((size_t)(end - p) > NAME_MAX)
            return fail(&w, ENAMETOOLONG, "%s/%.*s...: %s", shown(w.where), 32, p,
                        strerror(ENAMETOOLONG));
        memcpy(comp, p, (size_t)(end - p));
        comp[end - p] = '\0';
        if (!*comp || !strcmp(comp, ".")) {
            if (!*comp || last) { /* the path names a directory */
                if (fstat(w.dir, st) != 0)
                    return fail(&w, errno, "%s: %s", shown(w.where), strerror(errno));
                *fd = w.dir;
                return 0;
            }
            p = next;
            continue;
        }
        step_name(name, sizeof name, w.where, comp);
        int f = openat(w.dir, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        struct stat s;
        if (f < 0 || fstat(f, &s) != 0) {
            int err = errno;
            if (f >= 0)
                close(f);
            return fail(&w, err, "%s: %s", shown(name), strerror(err));
        }
        if (w.loose && !trusted_owner(&w, s.st_uid)) {
            close(f);
            return fail(&w, EPERM,
                        "%s is owned by uid %u in %s, a directory other users can write",
                        shown(name), (unsigned)s.st_uid, shown(w.where));
        }
        if (S_ISLNK(s.st_mode)) {
            char target[PATH_MAX], rest[TODO_SIZE];
            ssize_t n = (last && (flags & PROGCACHE__TRUSTED_NO_LINK)) || ++links > MAX_LINKS
                            ? -1
                            : readlinkat(f, "", target, sizeof target - 1);
            close(f);
            if (last && (flags & PROGCACHE__TRUSTED_NO_LINK))
                return fail(&w, ELOOP, "%s is a symbolic link", shown(name));
            if (n <= 0)
                return fail(&w, links > MAX_LINKS ? ELOOP : errno, "%s: %s", shown(name),
                            links > MAX_LINKS ? "too many symbolic links" : strerror(errno));
            target[n] = '\0';
            if ((size_t)snprintf(rest, sizeof rest, "%s/%s", target, next) >= sizeof rest)
                return fail(&w, ENAMETOOLONG, "%s: %s", shown(name), strerror(ENAMETOOLONG));
            memcpy(w.todo, rest, strlen(rest) + 1);
            p = w.todo;
            if (target[0] == '/' && go_to_root(&w))
                return -1;
            continue;
        }
        if (S_ISDIR(s.st_mode) && !last) {
            if (check_dir(&w, &s, name)) {
                close(f);
                return -1;
            }
            close(w.dir);
            w.dir = f;
            snprintf(w.where, sizeof w.where, "%s", name);
            p = next;
            continue;
        }
        if (!last) {
            close(f);
            return fail(&w, ENOTDIR, "%s: %s", shown(name), strerror(ENOTDIR));
        }
        if ((flags & PROGCACHE__TRUSTED_READ) && S_ISREG(s.st_mode)) {
            /* Opened again by name from the same directory, without
             * following a link, and checked to be the same file. */
            int r = openat(w.dir, comp, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
            struct stat rs;
            int same = r >= 0 && fstat(r, &rs) == 0 && rs.st_dev == s.st_dev &&
                       rs.st_ino == s.st_ino;
            int err = errno;
            close(f);
            if (!same) {
                if (r >= 0)
                    close(r);
                return fail(&w, r < 0 ? err : EAGAIN, "%s: %s", shown(name),
                            r < 0 ? strerror(err) : "changed while it was being opened");
            }
            f = r;
            s = rs;
        }
        close(w.dir);
        *fd = f;
        *st = s;
        return 0;
    }
}

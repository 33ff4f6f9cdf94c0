/* Files the user names on the command line, read and written the way
 * docs/CLI.md promises ("Inputs and outputs"): every input with a bound,
 * every output without replacing what is not a regular file; and JSON
 * strings that stay valid whatever bytes a path holds. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tool.h"

/* ---- inputs ------------------------------------------------------------------ */

static int too_large(const char *cmd, const char *what, const char *name, int known,
                     uint64_t size, uint64_t max)
{
    char bound[64], have[64];
    tool_format_size_long(bound, sizeof bound, max);
    if (known) {
        tool_format_size_long(have, sizeof have, size);
        return tool_error(cmd,
                          "%s %s is %s (%llu bytes), more than the maximum artifact size of %s "
                          "(%llu bytes); raise the bound with --max-artifact-size SIZE",
                          what, name, have, (unsigned long long)size, bound,
                          (unsigned long long)max);
    }
    return tool_error(cmd,
                      "%s %s holds more than %llu bytes (%s), the maximum artifact size; raise "
                      "the bound with --max-artifact-size SIZE",
                      what, name, (unsigned long long)max, bound);
}

/* read() that retries after EINTR, and waits on a descriptor someone left
 * non-blocking (our standard input) as a blocking read would. */
static ssize_t read_some(int fd, void *buf, size_t len)
{
    for (;;) {
        ssize_t n = read(fd, buf, len);
        if (n >= 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK))
            return n;
        if (errno != EINTR) {
            struct pollfd p = {.fd = fd, .events = POLLIN};
            (void)poll(&p, 1, -1);
        }
    }
}

int tool_read_input(const char *cmd, const char *what, const char *path, unsigned int flags,
                    uint64_t max, unsigned char **data, size_t *size)
{
    int use_stdin = (flags & TOOL_INPUT_STDIN) && !strcmp(path, "-");
    char name[PATH_MAX + 8];
    snprintf(name, sizeof name, use_stdin ? "(standard input)" : "\"%s\"", path);
    *data = NULL;
    *size = 0;
    if (max == 0)
        max = PROGCACHE_MAX_ARTIFACT_SIZE_DEFAULT;
    if (max > (uint64_t)SIZE_MAX / 2)
        max = (uint64_t)SIZE_MAX / 2;
    /* O_NOCTTY: naming a terminal must not make it ours. */
    /* TOOL_INPUT_REGULAR: O_NONBLOCK, so that a FIFO is refused below
     * instead of waited on (a regular file reads as usual). */
    int oflags = O_RDONLY | O_CLOEXEC | O_NOCTTY | (flags & TOOL_INPUT_REGULAR ? O_NONBLOCK : 0);
    int fd = use_stdin ? STDIN_FILENO : open(path, oflags);
    if (fd < 0)
        return tool_error(cmd, "%s %s: cannot read: %s", what, name, strerror(errno));
    struct stat st;
    int code = EXIT_OK;
    unsigned char *buf = NULL;
    size_t len = 0, cap = 0;
    if (fstat(fd, &st) != 0) {
        code = tool_error(cmd, "%s %s: cannot read: %s", what, name, strerror(errno));
        goto done;
    }
    if (S_ISDIR(st.st_mode)) {
        code = tool_error(cmd, "%s %s: cannot read: %s", what, name, strerror(EISDIR));
        goto done;
    }
    if ((flags & TOOL_INPUT_REGULAR) && !S_ISREG(st.st_mode)) {
        code = tool_error(cmd, "%s %s: not a regular file", what, name);
        goto done;
    }
    /* A regular file says its size: refuse before reading a byte. */
    if (S_ISREG(st.st_mode) && (uint64_t)st.st_size > max) {
        code = too_large(cmd, what, name, 1, (uint64_t)st.st_size, max);
        goto done;
    }
    /* cap never exceeds max + 1: one byte past the bound says "more". */
    cap = S_ISREG(st.st_mode) ? (size_t)st.st_size + 1 : 65536;
    if ((uint64_t)cap > max + 1)
        cap = (size_t)max + 1;
    for (;;) {
        if (!buf || len == cap) {
            size_t ncap = !buf ? cap : (uint64_t)cap * 2 > max + 1 ? (size_t)max + 1 : cap * 2;
            unsigned char *p = realloc(buf, ncap + 1);
            if (!p) {
                code = tool_error(cmd, "%s %s: out of memory reading it", what, name);
                goto done;
            }
            buf = p;
            cap = ncap;
        }
        ssize_t got = read_some(fd, buf + len, cap - len);
        if (got < 0) {
            code = tool_error(cmd, "%s %s: cannot read: %s", what, name, strerror(errno));
            goto done;
        }
        if (got == 0)
            break;
        len += (size_t)got;
        if ((uint64_t)len > max) {
            code = too_large(cmd, what, name, 0, 0, max);
            goto done;
        }
    }
    buf[len] = '\0';
    *data = buf;
    *size = len;
    buf = NULL;
done:
    free(buf);
    if (!use_stdin)
        close(fd);
    return code;
}

/* ---- outputs ----------------------------------------------------------------- */

static void output_release(tool_output *o)
{
    if (o->fd >= 0)
        close(o->fd);
    if (o->dirfd >= 0)
        close(o->dirfd);
    free(o->tmp);
    free(o->final);
    o->fd = o->dirfd = -1;
    o->tmp = o->final = NULL;
}

/* A temp file next to target (a path whose last component may not exist):
 * fills dirfd, tmp, final, fd. 0, or -1 with errno. */
static int open_temp(tool_output *o, const char *target, mode_t mode)
{
    const char *slash = strrchr(target, '/');
    const char *base = slash ? slash + 1 : target;
    char *dir = slash ? strndup(target, slash == target ? 1 : (size_t)(slash - target))
                      : strdup(".");
    if (!dir || !*base) {
        free(dir);
        errno = dir ? EISDIR : ENOMEM;
        return -1;
    }
    o->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(dir);
    if (o->dirfd < 0)
        return -1;
    if (!(o->final = strdup(base)))
        return errno = ENOMEM, -1;
    size_t n = strlen(base) + 32;
    if (!(o->tmp = malloc(n)))
        return errno = ENOMEM, -1;
    for (int attempt = 0; attempt < 100; attempt++) {
        snprintf(o->tmp, n, ".%s.progcache-%ld-%d", base, (long)getpid(), attempt);
        o->fd = openat(o->dirfd, o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                       mode);
        if (o->fd >= 0 || errno != EEXIST)
            break;
    }
    if (o->fd < 0) {
        free(o->tmp);
        o->tmp = NULL;
        return -1;
    }
    /* open() applied the umask; an existing file's mode is kept exactly. */
    if (fchmod(o->fd, mode) != 0) {
        int saved = errno;
        (void)unlinkat(o->dirfd, o->tmp, 0);
        errno = saved;
        return -1;
    }
    return 0;
}

static const char *kind_words(mode_t mode)
{
    return S_ISDIR(mode)    ? "a directory"
           : S_ISBLK(mode)  ? "a block device"
           : S_ISSOCK(mode) ? "a socket"
                            : "not a regular file";
}

int tool_output_open(const char *cmd, const char *path, tool_output *o)
{
    memset(o, 0, sizeof *o);
    o->path = path;
    o->fd = o->dirfd = -1;
    struct stat st, lst;
    char *resolved = NULL;
    int code = EXIT_OK;
    if (lstat(path, &lst) != 0) {
        if (errno != ENOENT)
            return tool_error(cmd, "cannot write %s: %s", path, strerror(errno));
        mode_t mask = umask(0);
        umask(mask);
        if (open_temp(o, path, 0666 & ~mask) != 0)
            code = tool_error(cmd, "cannot write %s: %s", path, strerror(errno));
        goto done;
    }
    if (S_ISLNK(lst.st_mode)) {
        /* Followed, as the user asked: the target gets the bytes, the link
         * stays. One that leads nowhere is refused: creating its target
         * would write wherever the link's owner pointed it. */
        if (stat(path, &st) != 0) {
            code = tool_error(cmd,
                              "cannot write %s: it is a symbolic link to %s (%s); give the "
                              "target's path",
                              path, errno == ENOENT ? "nothing" : "a path that cannot be used",
                              strerror(errno));
            goto done;
        }
    } else {
        st = lst;
    }
    if (S_ISREG(st.st_mode)) {
        if (S_ISLNK(lst.st_mode) && !(resolved = realpath(path, NULL))) {
            code = tool_error(cmd, "cannot write %s: %s", path, strerror(errno));
            goto done;
        }
        if (open_temp(o, resolved ? resolved : path, st.st_mode & 0777) != 0)
            code = tool_error(cmd, "cannot write %s: %s", path, strerror(errno));
        goto done;
    }
    if (!S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode)) {
        code = tool_error(cmd,
                          "cannot write %s: it is %s, which progcache does not replace or "
                          "write into; give a file name (or '-' for standard output)",
                          path, kind_words(st.st_mode));
        goto done;
    }
    /* A device or a FIFO: written in place, never created or truncated.
     * Non-blocking, so a FIFO nobody reads fails at once (ENXIO) instead
     * of waiting for ever; then blocking again for the writes. */
    o->fd = open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (o->fd < 0) {
        code = errno == ENXIO ? tool_error(cmd,
                                           "cannot write %s: it is a FIFO and nothing is "
                                           "reading it; start the reader first",
                                           path)
                              : tool_error(cmd, "cannot write %s: %s", path, strerror(errno));
        goto done;
    }
    struct stat now;
    if (fstat(o->fd, &now) != 0 || (now.st_mode & S_IFMT) != (st.st_mode & S_IFMT)) {
        code = tool_error(cmd, "cannot write %s: it changed while it was being opened", path);
        goto done;
    }
    int fl = fcntl(o->fd, F_GETFL);
    if (fl < 0 || fcntl(o->fd, F_SETFL, fl & ~O_NONBLOCK) != 0)
        code = tool_error(cmd, "cannot write %s: %s", path, strerror(errno));
done:
    free(resolved);
    if (code)
        output_release(o);
    return code;
}

int tool_output_write(const char *cmd, tool_output *o, const void *data, size_t len)
{
    const char *p = data;
    while (len) {
        ssize_t n = write(o->fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return tool_error(cmd, "cannot write %s: %s", o->path,
                              strerror(n < 0 ? errno : EIO));
        p += n;
        len -= (size_t)n;
    }
    return EXIT_OK;
}

int tool_output_close(const char *cmd, tool_output *o, int ok)
{
    int code = EXIT_OK;
    if (o->tmp) {
        if (ok && fsync(o->fd) != 0)
            code = tool_error(cmd, "cannot write %s: %s", o->path, strerror(errno));
        if (close(o->fd) != 0 && ok && !code)
            code = tool_error(cmd, "cannot write %s: %s", o->path, strerror(errno));
        o->fd = -1;
        if (ok && !code && renameat(o->dirfd, o->tmp, o->dirfd, o->final) != 0)
            code = tool_error(cmd, "cannot rename the output into %s: %s", o->path,
                              strerror(errno));
        if (!ok || code)
            (void)unlinkat(o->dirfd, o->tmp, 0);
    } else if (o->fd >= 0) {
        if (close(o->fd) != 0 && ok)
            code = tool_error(cmd, "cannot write %s: %s", o->path, strerror(errno));
        o->fd = -1;
    }
    output_release(o);
    return code;
}

/* ---- JSON ----------------------------------------------------------------------- */

/* Length of the well-formed UTF-8 sequence at p (Unicode's table 3-7: no
 * overlong forms, no surrogates, nothing above U+10FFFF), or 0. */
static size_t utf8_length(const unsigned char *p)
{
    unsigned char lo = 0x80, hi = 0xbf;
    size_t n;
    if (p[0] >= 0xc2 && p[0] <= 0xdf)
        n = 2;
    else if (p[0] >= 0xe0 && p[0] <= 0xef)
        n = 3;
    else if (p[0] >= 0xf0 && p[0] <= 0xf4)
        n = 4;
    else
        return 0;
    if (p[0] == 0xe0)
        lo = 0xa0; /* overlong below */
    else if (p[0] == 0xed)
        hi = 0x9f; /* U+D800-DFFF */
    else if (p[0] == 0xf0)
        lo = 0x90; /* overlong below */
    else if (p[0] == 0xf4)
        hi = 0x8f; /* above U+10FFFF */
    if (p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    return n;
}

void tool_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p >= 0x80) {
            size_t n = utf8_length(p);
            if (n) {
                fwrite(p, 1, n, f);
                p += n - 1;
            } else {
                /* Not UTF-8 (a path is any bytes): Python's surrogateescape. */
                fprintf(f, "\\udc%02x", *p);
            }
        } else if (*p == '"' || *p == '\\') {
            fprintf(f, "\\%c", *p);
        } else if (*p == '\n') {
            fputs("\\n", f);
        } else if (*p == '\t') {
            fputs("\\t", f);
        } else if (*p == '\r') {
            fputs("\\r", f);
        } else if (*p < 0x20 || *p == 0x7f) {
            fprintf(f, "\\u%04x", *p);
        } else {
            fputc(*p, f);
        }
    }
    fputc('"', f);
}

void tool_json_begin(FILE *f) { fprintf(f, "{\"schema\": %d", TOOL_JSON_SCHEMA); }

const char *tool_entries(uint64_t n) { return n == 1 ? "entry" : "entries"; }

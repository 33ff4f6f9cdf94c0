/* Configuration from the environment. This file is the only place the
 * library calls getenv (the public progcache_default_dir,
 * progcache_default_remote and progcache_remote_secret_read are
 * cache/cache_remote.c's wrappers of the functions here: util/ includes
 * no header of a layer above it) (docs/CONFIG.md lists every variable): the cache
 * directory, the remote tier, and the variables that override a cache
 * directory's settings (PROGCACHE_MAX_SIZE, ...). */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "buf.h"
#include "config.h"
#include "error.h"
#include "fs.h"
#include "settings_table.h"
#include "trusted_path.h"

static int join(progcache_buf *out, const char *a, const char *b)
{
    out->size = 0;
    if (out->data)
        out->data[0] = '\0';
    int rc = progcache__buf_append(out, a, strlen(a));
    if (!rc)
        rc = progcache__buf_append(out, b, strlen(b));
    return rc;
}

int progcache__config_default_dir(progcache_buf *out)
{
    if (!out)
        return progcache__error(PROGCACHE_EINVAL, "progcache_default_dir: out is NULL");
    const char *dir = getenv("PROGCACHE_DIR");
    if (dir && *dir)
        return join(out, dir, "");
    /* cuda.core's default (cuda.core.utils._cache_dir), so that C and
     * Python programs meet in one cache without configuration. */
    const char *xdg = getenv("XDG_CACHE_HOME");
    if (xdg && *xdg)
        return join(out, xdg, "/cuda-python/program-cache");
    const char *home = getenv("HOME");
    if (home && *home)
        return join(out, home, "/.cache/cuda-python/program-cache");
    return progcache__error(PROGCACHE_EINVAL,
                            "no cache directory: set PROGCACHE_DIR (or XDG_CACHE_HOME or HOME), "
                            "or pass a directory");
}

/* The secret is read from a file, not taken from the environment itself:
 * a file can be made readable by its owner (or a group) alone.
 *
 * A secret file that was named but cannot be used is an error, never "no
 * secret": the remote tier would otherwise run unauthenticated while its
 * operator believes it is protected (docs/SECURITY.md). So every way the
 * file can fail is refused with the variable, the file and the reason:
 * missing or unreadable; not a regular file (opened non-blocking, so a
 * FIFO cannot hang the open, and never read, so /dev/zero cannot feed
 * bytes without bound); readable or writable by every user (anyone on the
 * machine could forge entries or change the secret; ssh refuses such
 * private keys too); empty or shorter than the HMAC needs; longer than
 * MAX_SECRET (read with that bound, whatever the file claims). */
#define MIN_SECRET PROGCACHE__MIN_SECRET
#define MAX_SECRET 4096
#define VAR "PROGCACHE_REMOTE_SECRET_FILE"
#define HOW_TO_MAKE "(openssl rand 32 > FILE; chmod 600 FILE)"

static const char *file_kind(mode_t mode)
{
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISSOCK(mode))
        return "a socket";
    return "not a regular file";
}

static int check_secret_file(int fd, const char *path, const char *label)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return progcache__error_errno(PROGCACHE_EIO, errno, "%s %s cannot be read", label, path);
    if (!S_ISREG(st.st_mode))
        return progcache__error(PROGCACHE_EINVAL,
                                "%s %s is %s, not a regular file: give a file holding the "
                                "shared secret " HOW_TO_MAKE,
                                label, path, file_kind(st.st_mode));
    if (st.st_mode & (S_IROTH | S_IWOTH))
        return progcache__error(PROGCACHE_EINVAL,
                                "%s %s can be %s by every user (mode %04o): anyone on this "
                                "machine could %s; make it private (chmod o-rwx FILE)",
                                label, path,
                                (st.st_mode & S_IROTH) ? "read" : "written",
                                (unsigned)(st.st_mode & 07777),
                                (st.st_mode & S_IROTH) ? "forge cache entries with it"
                                                       : "replace it");
    return PROGCACHE_OK;
}

static _Thread_local unsigned long secrets_refused;

unsigned long progcache__config_secrets_refused(void) { return secrets_refused; }

static int read_secret_file(progcache_buf *out, const char *path, const char *label)
{
    /* Reached through directories only root or this user can change, and
     * checked and read through one descriptor: nobody can swap in a file
     * of their own (a secret they know) between the check and the read.
     * A link is followed from such a directory (a secret mounted as a
     * link, as Kubernetes does, is fine). */
    int fd;
    struct stat st;
    char why[600];
    if (progcache__trusted_open(&fd, &st, path, PROGCACHE__TRUSTED_READ, why, sizeof why) != 0) {
        int err = errno;
        if (err == EPERM)
            return progcache__error(PROGCACHE_EINVAL,
                                    "%s %s cannot be trusted: %s (anyone who can change it could "
                                    "give this program a secret they know)",
                                    label, path, why);
        /* why is "<the component that failed>: <strerror>" */
        char *colon = strrchr(why, ':');
        if (colon)
            *colon = '\0';
        if (!colon || !strcmp(why, path))
            return progcache__error_errno(progcache__code_from_errno(err), err,
                                          "%s %s cannot be opened", label, path);
        return progcache__error_errno(progcache__code_from_errno(err), err,
                                      "%s %s cannot be opened (at %s)", label, path, why);
    }
    int rc = check_secret_file(fd, path, label);
    if (rc)
        goto done;
    /* One byte over the bound tells a file that is too long. */
    if ((rc = progcache__buf_reserve(out, MAX_SECRET + 1)))
        goto done;
    ssize_t n = progcache__fs_read_full(fd, out->data, MAX_SECRET + 1);
    if (n < 0) {
        rc = progcache__error_errno(progcache__code_from_errno(errno), errno,
                                    "%s %s cannot be read", label, path);
        goto done;
    }
    if (n > MAX_SECRET) {
        rc = progcache__error(PROGCACHE_EINVAL,
                              "%s %s is longer than %d bytes: a shared secret is %d to %d "
                              "bytes " HOW_TO_MAKE,
                              label, path, MAX_SECRET, MIN_SECRET, MAX_SECRET);
        goto done;
    }
    if (n > 0 && out->data[n - 1] == '\n')
        n--;
    if (n < MIN_SECRET) {
        char size[48] = "is empty";
        if (n > 0)
            snprintf(size, sizeof size, "holds only %zd byte%s", n, n == 1 ? "" : "s");
        rc = progcache__error(PROGCACHE_EINVAL,
                              "%s %s %s: a shared secret must be at least %d bytes "
                              HOW_TO_MAKE,
                              label, path, size, MIN_SECRET);
        goto done;
    }
    progcache__buf_set_size(out, (size_t)n);
done:
    if (rc) {
        if (out->data)
            memset(out->data, 0, out->capacity);
        out->size = 0;
    }
    close(fd);
    return rc;
}

static int read_secret(progcache_buf *out, const char *path, const char *label)
{
    int rc = read_secret_file(out, path, label);
    if (rc && rc != PROGCACHE_ENOMEM)
        secrets_refused++;
    return rc;
}

int progcache__config_default_remote(progcache_buf *url, progcache_buf *secret)
{
    if (!url || !secret)
        return progcache__error(PROGCACHE_EINVAL, "progcache_default_remote: NULL argument");
    /* PROGCACHE_REMOTE_SECRET_FILE alone is not read: with no remote tier
     * nothing is fetched from anywhere, so there is nothing to
     * authenticate (docs/CONFIG.md). */
    const char *remote = getenv("PROGCACHE_REMOTE");
    if (!remote || !*remote)
        return PROGCACHE_ENOTFOUND;
    int rc = join(url, remote, "");
    if (rc)
        return rc;
    secret->size = 0;
    const char *file = getenv(VAR);
    return file && *file ? read_secret(secret, file, VAR) : PROGCACHE_OK;
}

int progcache__config_secret_read(progcache_buf *secret, const char *path)
{
    if (!secret || !path || !*path)
        return progcache__error(PROGCACHE_EINVAL, "progcache_remote_secret_read: %s",
                                !secret ? "secret is NULL" : "the path is empty");
    secret->size = 0;
    return read_secret(secret, path, "secret file");
}

/* A setting read where it is used (progcache__settings_apart): its
 * variable's value parsed by the settings table. PROGCACHE_OK;
 * PROGCACHE_ENOTFOUND when unset or empty; PROGCACHE_EINVAL (no message)
 * with *why. */
static int env_setting(uint64_t *out, const char **value, const char **why, int idx)
{
    *value = getenv(progcache__settings_variable(idx));
    if (!*value || !**value)
        return PROGCACHE_ENOTFOUND;
    return progcache__settings_parse(out, why, idx, *value);
}

int progcache__config_wait_timeout(unsigned int *out_ms)
{
    uint64_t ms = 0;
    const char *v = NULL, *why = "";
    int rc = env_setting(&ms, &v, &why, PROGCACHE__SET_WAIT_TIMEOUT);
    if (rc == PROGCACHE_EINVAL)
        return progcache__error(PROGCACHE_EINVAL,
                                "PROGCACHE_WAIT_TIMEOUT is \"%.64s\": %s; it is how long a "
                                "compile waits for another one before compiling itself",
                                v, why);
    if (rc == PROGCACHE_OK)
        *out_ms = (unsigned int)ms; /* at most 24 hours */
    return rc;
}

/* ---- what the rooms above read -------------------------------------------- */

int progcache__config_setting(uint64_t *out, const char **value, const char **why, int idx)
{
    return env_setting(out, value, why, idx);
}

const char *progcache__config_env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

int progcache__config_is_set(const char *name) { return getenv(name) != NULL; }

extern char **environ;

char **progcache__config_environ(void) { return environ; }

int progcache__settings_apply_env(progcache_settings *s)
{
    for (size_t i = 0; i < progcache_settings_count(s); i++) {
        const char *var = s->item[i].variable;
        const char *value = var ? getenv(var) : NULL;
        if (!value || !*value) /* empty counts as unset, as for every variable */
            continue;
        uint64_t number;
        const char *why;
        /* A value that cannot be used is ignored and said, never a cache
         * turned off: a setting read where it is used is reported there
         * (the PCH tier turns off and says why), the others by the
         * directory's resolution (store/file/file_settings.c). */
        if (progcache__settings_parse(&number, &why, (int)i, value) != PROGCACHE_OK) {
            s->ignored[i] = !progcache__settings_apart((int)i);
            continue;
        }
        int rc = progcache__settings_assign(s, (int)i, value, PROGCACHE_SETTING_ENV, var);
        if (rc)
            return rc;
    }
    return PROGCACHE_OK;
}

/* ---- NVRTC (src/key/nvrtc_lib.c) ----------------------------------------- */

const char *progcache__config_nvrtc_library(void)
{
    const char *v = getenv("PROGCACHE_NVRTC_LIBRARY");
    return v && *v ? v : NULL;
}

int progcache__config_nvrtc_version(int *major, int *minor)
{
    const char *v = getenv("PROGCACHE_NVRTC_VERSION");
    if (!v || !*v)
        return PROGCACHE_ENOTFOUND;
    /* "13.0": two decimal numbers, nothing else; 0.x is no NVRTC. */
    long a = 0, b = 0;
    const char *p = v;
    int da = 0, db = 0;
    for (; *p >= '0' && *p <= '9' && da < 4; p++, da++)
        a = a * 10 + (*p - '0');
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9' && db < 4; p++, db++)
            b = b * 10 + (*p - '0');
    if (!da || !db || *p || a == 0)
        return progcache__error(PROGCACHE_EINVAL,
                                "PROGCACHE_NVRTC_VERSION=\"%.40s\" is not an NVRTC version: "
                                "give <major>.<minor> as nvrtcVersion() answers it, e.g. 13.0",
                                v);
    *major = (int)a;
    *minor = (int)b;
    return PROGCACHE_OK;
}

/* ---- the team group (PROGCACHE_SHARED_GROUP) ------------------------------- */

#define GROUP_VAR "PROGCACHE_SHARED_GROUP"

int progcache__config_shared_group(gid_t *gid, char *name, size_t name_len)
{
    const char *v = getenv(GROUP_VAR);
    if (!v || !*v)
        return PROGCACHE_ENOTFOUND;
    snprintf(name, name_len, "%s", v);
    /* A name, or a number (a group the name service does not list). */
    struct group gr, *found = NULL;
    char buf[4096];
    char *end;
    errno = 0;
    unsigned long n = strtoul(v, &end, 10);
    if (*v >= '0' && *v <= '9' && !*end && !errno && n < (gid_t)-1) {
        *gid = (gid_t)n;
        return PROGCACHE_OK;
    }
    int e = getgrnam_r(v, &gr, buf, sizeof buf, &found);
    if (found) {
        *gid = found->gr_gid;
        return PROGCACHE_OK;
    }
    return progcache__error(PROGCACHE_EINVAL,
                            GROUP_VAR " is \"%.64s\": %s; give the name or number of the group "
                            "whose members share the cache (docs/SHARED.md)",
                            v, e ? strerror(e) : "there is no such group");
}

/* ---- the library's log (PROGCACHE_LOG: util/log.c) ------------------------ */

int progcache__config_log(int *level, const char **file, const char **bad)
{
    static const struct {
        const char *word;
        int level;
    } levels[] = {{"off", -1},
                  {"error", PROGCACHE_LOG_ERROR},
                  {"warn", PROGCACHE_LOG_WARN},
                  {"info", PROGCACHE_LOG_INFO},
                  {"debug", PROGCACHE_LOG_DEBUG}};
    const char *v = getenv("PROGCACHE_LOG");
    *file = NULL;
    *bad = v;
    if (!v || !*v)
        return PROGCACHE_ENOTFOUND;
    const char *colon = strchr(v, ':');
    size_t n = colon ? (size_t)(colon - v) : strlen(v);
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++)
        if (strlen(levels[i].word) == n && !strncasecmp(v, levels[i].word, n)) {
            if (colon && !colon[1])
                return PROGCACHE_EINVAL; /* "warn:" names no file */
            *level = levels[i].level;
            *file = colon && levels[i].level >= 0 ? colon + 1 : NULL;
            return PROGCACHE_OK;
        }
    return PROGCACHE_EINVAL;
}

/* A cache directory's settings file, progcache/config (progcache/settings.h,
 * docs/CONFIG.md): read with the rules of every file of ours (never
 * followed through a link, never waited on, read with a bound), written
 * whole under the directory's lock, and resolved with the environment and
 * the program's options into what a store uses. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "config.h"
#include "buf.h"
#include "error.h"
#include "fs.h"
#include "settings_table.h"
#include "store/file/file_store.h"

/* Read root_fd's settings file into *text (*exists 0 when there is none).
 * With perm (for use): refuse a file every user may write, or one that is
 * not this user's, root's or (in a group cache) the team group's: its
 * values would be honoured. A writer replacing it anyway passes NULL. The
 * checks and the read are of one descriptor (opened O_NOFOLLOW and
 * O_NONBLOCK, then fstat): nothing can be swapped in between. */
static int read_text(progcache_buf *text, int root_fd, const char *path, int *exists,
                     const file_perm *perm, mode_t *ignored)
{
    struct stat st;
    *exists = 0;
    int fd = progcache__fs_open_regular(root_fd, PROGCACHE__SETTINGS_REL, O_RDONLY, 0, &st);
    if (fd < 0) {
        if (errno == ENOENT)
            return PROGCACHE_OK;
        if (errno == PROGCACHE__FS_ENOTREG || errno == ELOOP)
            return progcache__error(PROGCACHE_EIO,
                                    "the settings file %s is %s, not a regular file; remove it "
                                    "(progcache config writes a new one)",
                                    path, errno == ELOOP ? "a symbolic link"
                                                         : progcache__fs_type_name(st.st_mode));
        return progcache__error_errno(progcache__code_from_errno(errno), errno,
                                      "cannot read the settings file %s", path);
    }
    int rc = PROGCACHE_OK;
    if (st.st_size > PROGCACHE__SETTINGS_FILE_MAX) {
        rc = progcache__error(PROGCACHE_EIO,
                              "the settings file %s is %lld bytes, more than the %d a settings "
                              "file may hold; it is not one (docs/CONFIG.md)",
                              path, (long long)st.st_size, PROGCACHE__SETTINGS_FILE_MAX);
        goto done;
    }
    if (perm && (st.st_mode & S_IWOTH)) {
        rc = progcache__error(PROGCACHE_EINVAL,
                              "the settings file %s can be written by every user (mode %04o): "
                              "anyone could change this cache's settings; chmod o-w it",
                              path, (unsigned)(st.st_mode & 07777));
        goto done;
    }
    /* Group-writable: any member could have filled it (a team's 0660
     * lock renamed here, issue 29); only a group-trusting open takes the
     * team's settings file from the team. Another open of a team's
     * directory (the setting forgotten) still works, on the defaults:
     * *ignored says so to the caller. */
    if (perm && !progcache__perm_sole_writer(perm, &st, 1)) {
        if (ignored)
            *ignored = st.st_mode & 07777;
        goto done;
    }
    char why[192];
    if (perm && !progcache__perm_file_ok(perm, &st, why, sizeof why)) {
        rc = progcache__error(PROGCACHE_EINVAL,
                              "the settings file %s is refused: %s, so its values are not "
                              "honoured; remove it (progcache config writes a new one)%s",
                              path, why,
                              perm->group ? ""
                                          : " or, in a team's cache, set PROGCACHE_SHARED_GROUP "
                                            "(docs/SHARED.md)");
        goto done;
    }
    /* One byte over the bound tells a file that grew meanwhile. */
    if ((rc = progcache__buf_reserve(text, PROGCACHE__SETTINGS_FILE_MAX + 1)))
        goto done;
    ssize_t n = progcache__fs_read_full(fd, text->data, PROGCACHE__SETTINGS_FILE_MAX + 1);
    if (n < 0) {
        rc = progcache__error_errno(progcache__code_from_errno(errno), errno,
                                    "cannot read the settings file %s", path);
        goto done;
    }
    if (n > PROGCACHE__SETTINGS_FILE_MAX) {
        rc = progcache__error(PROGCACHE_EIO, "the settings file %s holds more than %d bytes",
                              path, PROGCACHE__SETTINGS_FILE_MAX);
        goto done;
    }
    progcache__buf_set_size(text, (size_t)n);
    *exists = 1;
done:
    close(fd);
    return rc;
}

/* Defaults, then root_fd's file, then (unless skipped) the environment. */
static int load(progcache_settings *s, int root_fd, int with_file_and_env, const file_perm *perm,
                mode_t *ignored)
{
    if (!with_file_and_env)
        return PROGCACHE_OK;
    progcache_buf text = PROGCACHE_BUF_INIT;
    int exists = 0;
    int rc = root_fd >= 0 ? read_text(&text, root_fd, s->path, &exists, perm, ignored)
                          : PROGCACHE_OK;
    if (!rc && exists)
        rc = progcache__settings_apply_file(s, (const char *)text.data, text.size);
    if (!rc)
        rc = progcache__settings_apply_env(s);
    progcache_buf_free(&text);
    return rc;
}

int progcache__file_settings_resolve(file_store *fs, const progcache_file_options *o)
{
    progcache_settings *s = progcache__calloc(1, sizeof *s);
    if (!s)
        return progcache__error(PROGCACHE_ENOMEM, "out of memory opening cache %s", fs->root);
    int rc = progcache__settings_init(s, fs->root);
    mode_t ignored = 0;
    if (!rc)
        rc = load(s, fs->root_fd, !(o->flags & PROGCACHE_FILE_NO_SETTINGS), &fs->perm, &ignored);
    if (!rc && ignored) {
        fs->files_refused++; /* counted with the open's other refusals */
        progcache__file_log(fs, PROGCACHE_LOG_WARN,
                            "%s/%s is ignored: its group can write it (mode %04o), so any member "
                            "could have put its values there; this open does not trust the "
                            "group (set PROGCACHE_SHARED_GROUP to share a team's cache, or "
                            "chmod g-w it)",
                            fs->root, PROGCACHE__SETTINGS_REL, (unsigned)ignored);
    }
    if (!rc)
        rc = progcache__settings_api(s, PROGCACHE__SET_MAX_SIZE, o->max_size,
                                     "progcache_file_options.max_size");
    if (!rc)
        rc = progcache__settings_api(s, PROGCACHE__SET_LOW_WATER_PERCENT, o->low_water_percent,
                                     "progcache_file_options.low_water_percent");
    if (!rc)
        rc = progcache__settings_api(s, PROGCACHE__SET_MAX_ARTIFACT_SIZE, o->max_artifact_size,
                                     "progcache_file_options.max_artifact_size");
    if (!rc && (o->flags & PROGCACHE_FILE_NO_FSYNC))
        rc = progcache__settings_api(s, PROGCACHE__SET_NO_FSYNC, 1,
                                     "PROGCACHE_FILE_NO_FSYNC");
    if (!rc && (o->flags & PROGCACHE_FILE_FSYNC))
        rc = progcache__settings_assign(s, PROGCACHE__SET_NO_FSYNC, "false",
                                        PROGCACHE_SETTING_API, "the program's options");
    if (rc) {
        progcache_settings_free(s);
        return rc;
    }
    for (int i = 0; i < PROGCACHE__SET_COUNT; i++) {
        uint64_t n;
        const char *value = "", *why = "";
        if (s->ignored[i] &&
            progcache__config_setting(&n, &value, &why, i) == PROGCACHE_EINVAL)
            progcache__file_log(fs, PROGCACHE_LOG_WARN,
                                "%s=\"%.64s\": %s; ignored (%s stays %s, from %s)",
                                s->item[i].variable, value, why, s->item[i].name,
                                s->item[i].value, s->item[i].origin);
    }
    fs->settings = s;
    fs->max_size = s->item[PROGCACHE__SET_MAX_SIZE].number;
    uint64_t pct = s->item[PROGCACHE__SET_LOW_WATER_PERCENT].number;
    fs->low_water = fs->max_size / 100 * pct + fs->max_size % 100 * pct / 100;
    fs->max_artifact_size = s->item[PROGCACHE__SET_MAX_ARTIFACT_SIZE].number;
    if (s->item[PROGCACHE__SET_NO_FSYNC].number)
        fs->flags |= PROGCACHE_FILE_NO_FSYNC;
    else
        fs->flags &= ~PROGCACHE_FILE_NO_FSYNC;
    return PROGCACHE_OK;
}

const progcache_settings *progcache_file_settings(const progcache_file *file)
{
    return file ? file->settings : NULL;
}

int progcache_settings_load(progcache_settings **out, const char *dir)
{
    if (!out)
        return progcache__error(PROGCACHE_EINVAL, "progcache_settings_load: out is NULL");
    *out = NULL;
    progcache_buf def = PROGCACHE_BUF_INIT;
    int rc;
    if (!dir) {
        if ((rc = progcache__config_default_dir(&def)))
            return rc;
        dir = (const char *)def.data;
    }
    progcache_settings *s = progcache__calloc(1, sizeof *s);
    int root_fd = -1;
    if (!s) {
        rc = progcache__error(PROGCACHE_ENOMEM, "out of memory reading the settings");
        goto done;
    }
    if ((rc = progcache__settings_init(s, *dir ? dir : NULL)))
        goto done;
    /* A directory that does not exist yet has no settings file: the
     * defaults and the environment are what a program would get. "": no
     * directory at all. */
    root_fd = *dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (!*dir)
        errno = ENOENT;
    if (root_fd < 0 && errno != ENOENT) {
        rc = progcache__error_errno(progcache__code_from_errno(errno), errno,
                                    "cannot use cache directory %s", dir);
        goto done;
    }
    if (root_fd >= 0 && (rc = progcache__file_check_dir(root_fd, dir)))
        goto done;
    /* Whose settings may be honoured: as a store of this directory would
     * decide (the team's group from PROGCACHE_SHARED_GROUP, the program's
     * flag being unknown here). */
    file_perm perm = {geteuid(), geteuid(), 0, (gid_t)-1, 0};
    struct stat root_st;
    if (root_fd >= 0 && fstat(root_fd, &root_st) == 0)
        perm.owner = root_st.st_uid;
    rc = progcache__config_shared_group(&perm.team, (char[64]){0}, 64);
    perm.group = rc == PROGCACHE_OK;
    if (rc == PROGCACHE_ENOTFOUND)
        rc = PROGCACHE_OK;
    mode_t ignored = 0;
    if (!rc)
        rc = load(s, root_fd, 1, &perm, &ignored);
    /* What a store ignores (with a warning) is not reported as the
     * directory's settings: refused here, where there is no log, as a file
     * of another user's is (the tools' size bounds and config read it). */
    if (!rc && ignored)
        rc = progcache__error(PROGCACHE_EINVAL,
                              "the settings file %s is refused: its group can write it (mode "
                              "%04o), so any member could have put its values there; set "
                              "PROGCACHE_SHARED_GROUP to share a team's cache, or chmod g-w it",
                              s->path, (unsigned)ignored);
done:
    if (root_fd >= 0)
        close(root_fd);
    progcache_buf_free(&def);
    if (rc)
        progcache_settings_free(s);
    else
        *out = s;
    return rc;
}

/* Check name = value as a reader would; the message names the setting. */
static int check_value(const char *dir, int idx, const char *name, const char *value)
{
    if (idx < 0)
        return progcache__error(PROGCACHE_EINVAL,
                                "unknown setting \"%s\"; the settings file takes max_size, "
                                "low_water_percent, memory_size, max_artifact_size, no_fsync",
                                name);
    progcache_settings probe;
    int rc = progcache__settings_init(&probe, dir);
    if (!rc && !probe.item[idx].in_file)
        rc = progcache__error(PROGCACHE_EINVAL,
                              "%s is read from the environment only (%s), not from the cache "
                              "directory's settings file",
                              name, probe.item[idx].variable);
    if (!rc && value) {
        if (!*value)
            rc = progcache__error(PROGCACHE_EINVAL, "%s: the value is empty (to remove the "
                                                    "setting, unset it)",
                                  name);
        else
            rc = progcache__settings_assign(&probe, idx, value, PROGCACHE_SETTING_API, name);
    }
    progcache__settings_release(&probe);
    return rc;
}

static int write_locked(file_store *fs, const char *name, const char *value)
{
    const char *path = fs->settings && fs->settings->path ? fs->settings->path : fs->root;
    progcache_buf old = PROGCACHE_BUF_INIT, text = PROGCACHE_BUF_INIT;
    int exists = 0, dirfd = -1;
    int rc = read_text(&old, fs->root_fd, path, &exists, NULL, NULL);
    if (!rc)
        rc = progcache__settings_edit(&text, exists ? (const char *)old.data : NULL,
                                      exists ? old.size : 0, name, value);
    if (rc)
        goto done;
    dirfd = progcache__file_dir(fs, FILE_STATE_DIR);
    if (dirfd < 0 ||
        progcache__fs_publish(dirfd, "config", "config-", text.data, text.size,
                              PROGCACHE__PUBLISH_REPLACE | PROGCACHE__PUBLISH_FSYNC |
                                  (fs->perm.group ? PROGCACHE__PUBLISH_GROUP : 0)) != 0) {
        char why[128];
        int e = errno;
        rc = progcache__error(progcache__code_from_errno(e),
                              "cannot write the settings file %s: %s", path,
                              progcache__fs_strerror(why, sizeof why, e));
    }
done:
    if (dirfd >= 0)
        close(dirfd);
    progcache_buf_free(&old);
    progcache_buf_free(&text);
    return rc;
}

int progcache_settings_set(const char *dir, const char *name, const char *value)
{
    progcache_buf def = PROGCACHE_BUF_INIT;
    int rc;
    if (!name)
        return progcache__error(PROGCACHE_EINVAL, "progcache_settings_set: name is NULL");
    if (!dir) {
        if ((rc = progcache__config_default_dir(&def)))
            return rc;
        dir = (const char *)def.data;
    }
    progcache_store *store = NULL;
    if ((rc = check_value(dir, progcache__settings_index(name), name, value)))
        goto done;
    /* The store, without reading the settings it is about to change (a
     * file that cannot be parsed must still be mendable). */
    progcache_file_options o;
    progcache_file_options_init(&o);
    o.flags = PROGCACHE_FILE_NO_SETTINGS;
    /* The team's group still decides the new file's mode. */
    if ((rc = progcache__file_new_internal(&store, dir, &o, PROGCACHE__FILE_GROUP_ENV)))
        goto done;
    file_store *fs = (file_store *)store;
    if (fs->flags & PROGCACHE_FILE_READONLY) {
        rc = progcache__file_refuse_write(fs, "write its settings file");
        goto done;
    }
    /* Without the lock (a file system that refuses it: said once) two
     * concurrent sets may lose one; the file is still published whole. */
    (void)progcache__file_lock(fs);
    rc = write_locked(fs, name, value);
    progcache__file_unlock(fs);
done:
    progcache_store_free(store);
    progcache_buf_free(&def);
    return rc;
}

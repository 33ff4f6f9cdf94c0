/* Who a cache directory belongs to, and the modes of what the store makes
 * in it (docs/SHARED.md, "Team caches, other users and root"):
 *
 *  - a private cache is its owner's alone: directories 0700, files 0600,
 *    whatever the umask; a directory of ours found looser is tightened;
 *  - a group cache (PROGCACHE_FILE_SHARED_GROUP, or PROGCACHE_SHARED_GROUP
 *    naming the group) is its group's: directories 02770 of that group,
 *    entries 0640, state 0660, so any member reads and writes what another
 *    made;
 *  - a process never writes into a cache directory that is another user's
 *    (root's processes included), unless it is a group cache of a group it
 *    belongs to, and never creates one inside another user's directory: it
 *    reads what it may trust and does not store, and says so once. Root
 *    writing a user's cache would leave root's files there, which the user
 *    can then neither replace nor remove. */
#include "store/file/file_store.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "config.h"
#include "error.h"
#include "fs.h"
#include "store/file/file_stats.h"

/* "alice (uid 1000)", or "uid 1000" when the name service has none. */
static void user_name(char *out, size_t len, uid_t uid)
{
    struct passwd pw, *found = NULL;
    char buf[1024];
    if (getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found)
        snprintf(out, len, "%s (uid %u)", found->pw_name, (unsigned)uid);
    else
        snprintf(out, len, "uid %u", (unsigned)uid);
}

static void group_name(char *out, size_t len, gid_t gid)
{
    struct group gr, *found = NULL;
    char buf[4096];
    if (getgrgid_r(gid, &gr, buf, sizeof buf, &found) == 0 && found)
        snprintf(out, len, "%s (gid %u)", found->gr_name, (unsigned)gid);
    else
        snprintf(out, len, "gid %u", (unsigned)gid);
}

static int member_of(gid_t gid)
{
    if (getegid() == gid)
        return 1;
    gid_t list[NGROUPS_MAX > 65536 ? 65536 : NGROUPS_MAX];
    int n = getgroups((int)(sizeof list / sizeof list[0]), list);
    for (int i = 0; i < n; i++)
        if (list[i] == gid)
            return 1;
    return 0;
}

int progcache__perm_file_ok(const file_perm *p, const struct stat *st, char *why, size_t len)
{
    char who[96];
    if (st->st_mode & S_IWOTH) {
        user_name(who, sizeof who, st->st_uid);
        snprintf(why, len, "every user can write it (mode %04o, owner %s)",
                 (unsigned)(st->st_mode & 07777), who);
        return 0;
    }
    if (st->st_uid == p->euid || st->st_uid == 0 || st->st_uid == p->owner ||
        (p->group && st->st_gid == p->team))
        return 1;
    user_name(who, sizeof who, st->st_uid);
    snprintf(why, len, "it belongs to %s, not to you (uid %u), root or the cache directory's "
             "owner%s",
             who, (unsigned)p->euid, p->group ? ", and is not of the cache's group" : "");
    return 0;
}

int progcache__perm_fix(const file_perm *p, int fd, struct stat *st, mode_t want)
{
    if (p->keep || st->st_uid != p->euid || (st->st_mode & 07777) == want)
        return 0;
    if (fchmod(fd, want) != 0)
        return -1;
    st->st_mode = (st->st_mode & ~(mode_t)07777) | want;
    return 1;
}

int progcache__file_perm_init(file_store *fs)
{
    fs->perm.euid = geteuid();
    fs->perm.owner = fs->perm.euid;
    fs->perm.group = (fs->flags & PROGCACHE_FILE_SHARED_GROUP) != 0;
    fs->perm.team = (gid_t)-1;
    fs->group_named = 0;
    if ((fs->flags & PROGCACHE_FILE_NO_SETTINGS) && !(fs->flags & PROGCACHE__FILE_GROUP_ENV))
        return PROGCACHE_OK;
    int rc = progcache__config_shared_group(&fs->perm.team, fs->group_text,
                                            sizeof fs->group_text);
    if (rc == PROGCACHE_ENOTFOUND)
        return PROGCACHE_OK;
    if (rc)
        return rc;
    fs->perm.group = 1;
    fs->group_named = 1;
    return PROGCACHE_OK;
}

/* mkdir -p's question: may the cache be made inside parent? Not inside
 * another user's directory (root's, as /tmp or /scratch, is fine; so is
 * the team's in a group cache). */
static int parent_ok(void *ctx, const char *parent, const struct stat *st)
{
    file_store *fs = ctx;
    if (st->st_uid == fs->perm.euid || st->st_uid == 0 ||
        (fs->perm.group && fs->perm.team != (gid_t)-1 && st->st_gid == fs->perm.team))
        return 1;
    char who[96];
    user_name(who, sizeof who, st->st_uid);
    progcache__error(PROGCACHE_EIO,
                     "cannot use cache directory %s: it does not exist, and it would be made "
                     "inside %s, which belongs to %s, not to you (uid %u); progcache never "
                     "writes into another user's directory (their later runs could not "
                     "replace or remove what you made): run as that user, or choose a "
                     "directory of your own (PROGCACHE_DIR, --dir)",
                     fs->root, parent, who, (unsigned)fs->perm.euid);
    errno = EACCES;
    return 0;
}

int progcache__file_make_root(file_store *fs, const char *path)
{
    progcache_error_clear();
    if (progcache__fs_mkdir_p(path, progcache__perm_dir_mode(&fs->perm),
                              progcache__perm_new_gid(&fs->perm), parent_ok, fs) == 0)
        return PROGCACHE_OK;
    if (*progcache_error_last())
        return PROGCACHE_EIO;
    int e = errno;
    return progcache__error(progcache__code_from_errno(e),
                            "cannot use cache directory %s: cannot create it: %s%s", path,
                            strerror(e), progcache__file_errno_hint(e));
}

/* Append "; name" to the warning of loose directories that are not ours. */
static void note_loose(file_store *fs, const char *rel, const struct stat *st)
{
    char who[96], one[PATH_MAX + 160];
    user_name(who, sizeof who, st->st_uid);
    snprintf(one, sizeof one, "%s%s/%s (mode %04o, owner %s)", fs->loose[0] ? "; " : "",
             fs->root, rel, (unsigned)(st->st_mode & 07777), who);
    size_t at = strlen(fs->loose);
    snprintf(fs->loose + at, sizeof fs->loose - at, "%s", one);
}

/* Whether a directory's mode is what the cache needs from it. */
static int mode_right(const file_perm *p, mode_t mode)
{
    if (p->group)
        return (mode & 02770) == 02770 && !(mode & S_IWOTH);
    return !(mode & 077);
}

int progcache__file_check_mode(file_store *fs, int fd, const char *rel, struct stat *st)
{
    if (fs->perm.keep || mode_right(&fs->perm, st->st_mode))
        return 0;
    if (fd < 0)
        return 1; /* the caller opens it and asks again */
    if (!fs->foreign && st->st_uid == fs->perm.euid) {
        int fixed = progcache__perm_fix(&fs->perm, fd, st, progcache__perm_dir_mode(&fs->perm));
        if (fixed > 0) {
            fs->modes_fixed++;
            return 1;
        }
    }
    note_loose(fs, rel, st);
    fs->files_refused++;
    return 0;
}

int progcache__file_perm_root(file_store *fs, const char *path, struct stat *root_st)
{
    file_perm *p = &fs->perm;
    char who[96], grp[96];
    if (p->group && fs->group_named && root_st->st_gid != p->team) {
        group_name(who, sizeof who, root_st->st_gid);
        return progcache__error(PROGCACHE_EINVAL,
                                "cache directory %s is of group %s, not of the group "
                                "PROGCACHE_SHARED_GROUP names (%s): make it the team's "
                                "(chgrp %s %s; chmod 2770 %s) or unset the variable",
                                path, who, fs->group_text, fs->group_text, path, path);
    }
    if (p->group && p->team == (gid_t)-1)
        p->team = root_st->st_gid;
    fs->root_gid = root_st->st_gid;
    p->owner = root_st->st_uid;
    int ours = root_st->st_uid == p->euid;
    /* A team's directory (setgid, group-writable) opened as a private
     * cache, the setting forgotten: its modes are left as they are (made
     * private, the team could no longer use it); what this process makes
     * is its own. */
    if (!p->group && (root_st->st_mode & S_ISGID) && (root_st->st_mode & 070) == 070 &&
        !(fs->flags & PROGCACHE_FILE_READONLY)) {
        p->keep = 1;
        group_name(grp, sizeof grp, root_st->st_gid);
        progcache__file_log(fs, PROGCACHE_LOG_WARN,
                            "cache directory %s looks like a team's cache (setgid, writable by "
                            "group %s) but is opened as a private one: its modes are left "
                            "alone; set PROGCACHE_SHARED_GROUP (or --shared-group) to share "
                            "it, or use a private directory",
                            path, grp);
    }
    int team_member = p->group && member_of(p->team);
    if ((fs->flags & PROGCACHE_FILE_READONLY) || ours || team_member)
        return PROGCACHE_OK;
    /* Another user's cache: read what may be trusted, write nothing. */
    fs->foreign = 1;
    fs->flags |= PROGCACHE_FILE_READONLY;
    user_name(who, sizeof who, root_st->st_uid);
    char also[160] = "";
    if (p->group) {
        group_name(grp, sizeof grp, p->team);
        snprintf(also, sizeof also, ", and you are not a member of its group %s", grp);
    }
    progcache__file_log(fs, PROGCACHE_LOG_WARN,
                        "cache directory %s belongs to %s, not to you (uid %u)%s; progcache "
                        "never writes into another user's cache: entries are read where they "
                        "may be trusted, and what is compiled is not stored (run as that "
                        "user, or use a directory of your own: PROGCACHE_DIR)",
                        path, who, (unsigned)p->euid, also);
    return PROGCACHE_OK;
}

int progcache__file_refuse_write(file_store *fs, const char *what)
{
    if (!fs->foreign)
        return progcache__error(PROGCACHE_EINVAL, "cache %s was opened read-only; cannot %s",
                                fs->root, what);
    struct stat st;
    char who[96] = "another user";
    if (fstat(fs->root_fd, &st) == 0)
        user_name(who, sizeof who, st.st_uid);
    return progcache__error(PROGCACHE_EIO,
                            "cannot %s: cache directory %s belongs to %s, not to you (uid %u), "
                            "and progcache never writes into another user's cache (run as that "
                            "user, e.g. runuser -u NAME -- progcache ..., or make it a group "
                            "cache: docs/SHARED.md)",
                            what, fs->root, who, (unsigned)fs->perm.euid);
}

void progcache__file_perm_report(file_store *fs)
{
    if (fs->modes_fixed)
        progcache__stats_add(fs->stats, PROGCACHE__MODES_FIXED, fs->modes_fixed);
    if (fs->files_refused)
        progcache__stats_add(fs->stats, PROGCACHE__FILES_REFUSED, fs->files_refused);
    fs->modes_fixed = fs->files_refused = 0;
    if (!fs->loose[0])
        return;
    progcache__file_log(fs, PROGCACHE_LOG_WARN,
                        "%s: directories of the cache that others can write, or that the %s "
                        "cannot use, and that are not yours to fix (ask their owner to chmod "
                        "%s them): %s",
                        fs->root, fs->perm.group ? "group" : "owner",
                        fs->perm.group ? "2770" : "go-rwx", fs->loose);
    fs->loose[0] = '\0';
}

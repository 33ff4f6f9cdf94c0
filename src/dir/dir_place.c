/* The places of a cache directory's progcache/ that the layers above use
 * (dir/dir.h): the compile locks, the lease files of network file
 * systems, each user's PCHs. The file tier owns the layout (file_layout.h
 * names them) and its rules make them (file_perm.c's modes, file_path.c's
 * refusal of links); the layers above ask for a place, never a path. */
#include "dir/dir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/file/file_store.h"

int progcache__store_foreign(progcache_store *store)
{
    file_store *fs = progcache_store_as_file(store);
    return fs && fs->foreign;
}

/* The place's name inside progcache/ (file_layout.h). */
static void place_name(char *out, size_t len, progcache__place place)
{
    switch (place) {
    case PROGCACHE__PLACE_FLIGHT: snprintf(out, len, "%s", FILE_FLIGHT); break;
    case PROGCACHE__PLACE_FLIGHT_D: snprintf(out, len, "%s", FILE_FLIGHT_DIR); break;
    default: snprintf(out, len, FILE_PCH_DIR_FMT, (unsigned)geteuid()); break;
    }
}

const char *progcache__store_place_path(char *out, size_t len, progcache__place place)
{
    char name[32];
    place_name(name, sizeof name, place);
    snprintf(out, len, FILE_STATE_DIR "/%s", name);
    return out;
}

/* The file store of store, which may write, and place's path in rel; NULL
 * with errno EINVAL (not a file store) or EROFS (it writes nothing). */
static file_store *writable_place(progcache_store *store, progcache__place place, char *rel,
                                  size_t len)
{
    file_store *fs = progcache_store_as_file(store);
    if (!fs || (fs->flags & PROGCACHE_FILE_READONLY)) {
        errno = fs ? EROFS : EINVAL;
        return NULL;
    }
    progcache__store_place_path(rel, len, place);
    return fs;
}

int progcache__store_open_own(progcache_store *store, progcache__place place, int flags,
                              struct stat *st, char *why, size_t len)
{
    st->st_mode = 0;
    why[0] = '\0';
    char rel[64];
    file_store *fs = writable_place(store, place, rel, sizeof rel);
    return fs ? progcache__file_open_own(fs, rel, flags, st, why, len) : -1;
}

/* Open the directory rel of fs, making it with mode and gid when it is
 * missing and the store may write (else EROFS); a link there is refused
 * (file_path.c). *made tells a failure to make it from one to open it. */
static int open_place_dir(file_store *fs, const char *rel, mode_t mode, gid_t gid, int *made)
{
    int fd = progcache__file_dir_make(fs, rel, mode, gid, made);
    if (fd >= 0)
        *made = 0;
    return fd;
}

int progcache__store_open_own_dir(progcache_store *store, progcache__place place)
{
    char rel[64];
    int made;
    file_store *fs = writable_place(store, place, rel, sizeof rel);
    /* The cache's directory mode and group whatever the umask (file_perm.c). */
    return fs ? open_place_dir(fs, rel, progcache__perm_dir_mode(&fs->perm),
                               progcache__perm_new_gid(&fs->perm), &made)
              : -1;
}

int progcache__store_open_private_dir(progcache_store *store, progcache__place place, char *why,
                                      size_t len)
{
    file_store *fs = progcache_store_as_file(store);
    char rel[64];
    int made = 0;
    progcache__store_place_path(rel, sizeof rel, place);
    int fd = fs ? open_place_dir(fs, rel, 0700, (gid_t)-1, &made) : (errno = EINVAL, -1);
    const char *what = made ? "cannot create it" : "cannot open it";
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) != 0) {
        what = "cannot stat it";
        int err = errno;
        close(fd);
        fd = -1;
        errno = err;
    }
    if (fd < 0) {
        snprintf(why, len, "%s: %s", what, strerror(errno));
        return -1;
    }
    if (st.st_uid != geteuid() || (st.st_mode & 077)) {
        snprintf(why, len, "it belongs to uid %u with mode %04o, and it must be a directory only "
                 "this user (uid %u) can use (mode 0700)",
                 (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777), (unsigned)geteuid());
        close(fd);
        errno = EPERM;
        return -1;
    }
    return fd;
}

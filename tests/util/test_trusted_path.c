/* Opening a file trusted by its path (util/trusted_path.h): every way a
 * path can lead somewhere others control is refused with the component
 * named, and what passes is the file the descriptor holds. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "trusted_path.h"

static char *root;

static void path_of(char *out, size_t size, const char *rel)
{
    snprintf(out, size, "%s/%s", root, rel);
}

static void make_file(const char *rel, const char *text, mode_t mode)
{
    char p[4096];
    path_of(p, sizeof p, rel);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, mode);
    CHECK(fd >= 0);
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    CHECK(close(fd) == 0 && chmod(p, mode) == 0);
}

static void make_dir(const char *rel, mode_t mode)
{
    char p[4096];
    path_of(p, sizeof p, rel);
    CHECK(mkdir(p, 0700) == 0 && chmod(p, mode) == 0);
}

static void make_link(const char *target, const char *rel)
{
    char p[4096];
    path_of(p, sizeof p, rel);
    CHECK(symlink(target, p) == 0);
}

/* Open rel (under root; absolute when rel starts with '/') with flags:
 * expect success and the file's text, or failure with errno err and why
 * holding fragment. */
static void expect(const char *rel, unsigned int flags, int err, const char *fragment)
{
    char p[4096], why[600] = "";
    if (rel[0] == '/' || !rel[0])
        snprintf(p, sizeof p, "%s", rel);
    else
        path_of(p, sizeof p, rel);
    int fd = -1;
    struct stat st;
    int rc = progcache__trusted_open(&fd, &st, p, flags, why, sizeof why);
    if (err) {
        if (rc == 0 || errno != err || !strstr(why, fragment)) {
            fprintf(stderr, "%s: rc %d errno %d why \"%s\", want errno %d and \"%s\"\n", p, rc,
                    errno, why, err, fragment);
            CHECK(0);
        }
        CHECK(fd == -1);
        return;
    }
    if (rc != 0)
        fprintf(stderr, "%s refused: %s\n", p, why);
    CHECK(rc == 0 && fd >= 0);
    if (flags & PROGCACHE__TRUSTED_READ) {
        char buf[64] = "";
        CHECK(read(fd, buf, sizeof buf - 1) >= 0);
        CHECK(strcmp(buf, fragment) == 0);
    }
    close(fd);
}

int main(void)
{
    root = test_mkdtemp("trusted");
    make_dir("ok", 0755);
    make_file("ok/file", "good", 0644);
    expect("ok/file", PROGCACHE__TRUSTED_READ, 0, "good");
    expect("ok/./file", PROGCACHE__TRUSTED_READ, 0, "good");
    expect("ok/../ok/file", PROGCACHE__TRUSTED_READ, 0, "good");
    expect("ok/missing", 0, ENOENT, "/ok/missing: No such file or directory");
    expect("ok/file/more", 0, ENOTDIR, "/ok/file: Not a directory");

    /* Relative to the working directory. */
    char cwd[4096];
    CHECK(getcwd(cwd, sizeof cwd) != NULL);
    CHECK(chdir(root) == 0);
    char here[4096];
    snprintf(here, sizeof here, "%s", "ok/file");
    int fd;
    struct stat st;
    char why[600];
    CHECK(progcache__trusted_open(&fd, &st, here, PROGCACHE__TRUSTED_READ, why, sizeof why) == 0);
    close(fd);
    CHECK(chdir(cwd) == 0);

    /* Links: followed from trusted directories, refused at the name with
     * NO_LINK, a loop ends. */
    make_link("ok", "via");
    make_link("file", "ok/alias");
    expect("via/file", PROGCACHE__TRUSTED_READ, 0, "good");
    expect("ok/alias", PROGCACHE__TRUSTED_READ, 0, "good");
    expect("ok/alias", PROGCACHE__TRUSTED_NO_LINK, ELOOP, "/ok/alias is a symbolic link");
    make_link("loop2", "loop1");
    make_link("loop1", "loop2");
    expect("loop1", 0, ELOOP, "too many symbolic links");

    /* A directory others can write, anywhere on the path, directly or
     * through a link; a sticky one holding this user's file is fine. */
    make_dir("open", 0777);
    make_file("open/file", "open", 0644);
    make_dir("open/sub", 0755);
    make_file("open/sub/file", "deep", 0644);
    expect("open/file", 0, EPERM, "/open is writable by other users (mode 0777)");
    expect("open/sub/file", 0, EPERM, "/open is writable by other users (mode 0777)");
    make_link("open/sub", "to-open");
    expect("to-open/file", 0, EPERM, "/open is writable by other users (mode 0777)");
    make_dir("group", 0775);
    make_file("group/file", "g", 0644);
    expect("group/file", 0, EPERM, "/group is writable by other users (mode 0775)");
    make_dir("sticky", 01777);
    make_file("sticky/file", "mine", 0600);
    expect("sticky/file", PROGCACHE__TRUSTED_READ, 0, "mine");
    if (geteuid() == 0) {
        char p[4096];
        path_of(p, sizeof p, "sticky/file");
        CHECK(chown(p, 65534, 65534) == 0);
        expect("sticky/file", 0, EPERM, "is owned by uid 65534 in");
        make_dir("theirs", 0755);
        make_file("theirs/file", "t", 0644);
        path_of(p, sizeof p, "theirs");
        CHECK(chown(p, 65534, 65534) == 0);
        expect("theirs/file", 0, EPERM, "is owned by uid 65534, neither root nor this user");
    }

    /* Not a regular file: never opened for reading (a FIFO cannot block). */
    char fifo[4096];
    path_of(fifo, sizeof fifo, "ok/fifo");
    CHECK(mkfifo(fifo, 0600) == 0);
    CHECK(progcache__trusted_open(&fd, &st, fifo, PROGCACHE__TRUSTED_READ, why, sizeof why) == 0);
    CHECK(S_ISFIFO(st.st_mode));
    CHECK((fcntl(fd, F_GETFL) & O_PATH) == O_PATH);
    close(fd);

    expect("", 0, EINVAL, "the path is empty");
    test_rmdtemp(root);
    puts("test_trusted_path: ok");
    return 0;
}

/* src/util/fs.c: temp names stay unique across fork. A child forked from a
 * process that already drew temp names must not draw the same ones as its
 * siblings: with leftovers of a crashed sibling in tmp/, it would collide
 * on every attempt and fail its put (found by test_store_file_crash on a
 * 16-core machine). */
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "fs.h"

int main(void)
{
    char *dir = test_mkdtemp("fsnames");
    int dirfd = open(dir, O_RDONLY | O_DIRECTORY);
    CHECK(dirfd >= 0);
    char name[64];
    /* The parent draws a name first, so its children inherit its state. */
    int fd = progcache__fs_create_temp(dirfd, "entry-", 0600, name, sizeof name);
    CHECK(fd >= 0);
    close(fd);

    /* A first child leaves 150 temp files behind, as a crashed writer
     * would; a second child then needs one more. */
    for (int child = 0; child < 2; child++) {
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            int want = child == 0 ? 150 : 1;
            for (int i = 0; i < want; i++) {
                int f = progcache__fs_create_temp(dirfd, "entry-", 0600, name, sizeof name);
                if (f < 0)
                    _exit(1);
                close(f);
            }
            _exit(0);
        }
        int status;
        CHECK(waitpid(pid, &status, 0) == pid);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    close(dirfd);
    test_rmdtemp(dir);
    printf("test_fs: all passed\n");
    return 0;
}

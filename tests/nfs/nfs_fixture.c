/* The C side of tests/nfs/nfs_fixture.sh (nfs_fixture.h). */
#include "nfs_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static test_nfs *running;
static pid_t owner;

static void stop_at_exit(void)
{
    /* Forked children exit too: only the process that started it stops it. */
    if (running && getpid() == owner)
        test_nfs_stop(running);
}

static void chomp(char *s)
{
    s[strcspn(s, "\n")] = '\0';
}

void test_nfs_start(test_nfs *n)
{
    memset(n, 0, sizeof *n);
    n->dir = test_mkdtemp("nfs");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "bash '%s' start '%s' %ld", PROGCACHE_NFS_FIXTURE, n->dir,
             (long)getpid());
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL);
    int lines = fgets(n->export_, sizeof n->export_, p) &&
                fgets(n->node[0], sizeof n->node[0], p) && fgets(n->node[1], sizeof n->node[1], p);
    int status = pclose(p);
    if (WIFEXITED(status) && WEXITSTATUS(status) == TEST_SKIP_CODE) {
        fprintf(stderr, "test: skipped: the network file system fixture cannot run here\n");
        exit(TEST_SKIP_CODE);
    }
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0 && lines);
    chomp(n->export_);
    chomp(n->node[0]);
    chomp(n->node[1]);
    owner = getpid();
    if (!running)
        atexit(stop_at_exit);
    running = n;
}

void test_nfs_stop(test_nfs *n)
{
    if (!n->dir)
        return;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "bash '%s' stop '%s'", PROGCACHE_NFS_FIXTURE, n->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "test: the network file system fixture did not stop cleanly\n");
    free(n->dir);
    n->dir = NULL;
    if (running == n)
        running = NULL;
}

int test_nfs_end(test_nfs *n, int nfs, char *local, const char *name)
{
    if (nfs)
        test_nfs_stop(n);
    else
        test_rmdtemp(local);
    printf("%s %s: all passed\n", name, nfs ? "nfs" : "local");
    return 0;
}

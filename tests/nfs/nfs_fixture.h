/* A network file system for a C test (tests/nfs/nfs_fixture.sh does the
 * work; docs/SHARED.md): one directory served by a private sshd on
 * 127.0.0.1 and mounted twice with sshfs, as two nodes mounting one export.
 * No user extended attributes, no byte-range lock across the mounts,
 * close-to-open consistency (the script says which sshfs options).
 *
 * test_nfs_start exits 77 (SKIPPED, with the reason) where FUSE cannot
 * mount; it CHECK-fails on any other error. The mounts are undone and sshd
 * stopped at exit, by test_nfs_stop, and, if the test dies any other way
 * (abort, SIGKILL at a CTest timeout), by the script's watchdog within a
 * second. */
#ifndef PROGCACHE_TEST_NFS_FIXTURE_H
#define PROGCACHE_TEST_NFS_FIXTURE_H

typedef struct test_nfs {
    char *dir;         /* the fixture's directory (keys, config, logs) */
    char export_[512]; /* the served directory, as the server sees it */
    char node[2][512]; /* its two mounts: node A and node B */
} test_nfs;

void test_nfs_start(test_nfs *n);
/* Unmount, stop sshd, remove the directory. Safe to call twice. */
void test_nfs_stop(test_nfs *n);

/* The end of a test that ran on the fixture (nfs) or on the local
 * directory local (test_mkdtemp): the one stopped or the other removed,
 * then "name nfs|local: all passed". Returns 0, main's status. */
int test_nfs_end(test_nfs *n, int nfs, char *local, const char *name);

#endif

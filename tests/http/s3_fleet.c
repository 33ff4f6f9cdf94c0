/* Compile-or-load across a fleet whose only shared tier is the one
 * $PROGCACHE_REMOTE names (test_s3_tier.py: S3 alone): NODES cache
 * directories ("nodes") under DIR, PROCS processes on each, all started
 * together through the real progcache_compile_or_load with NVRTC
 * (compile only, no GPU), one cold program. S3's leases (conditional
 * create) must make it one compile in the whole fleet; every process must
 * end with the bytes NVRTC makes without a cache.
 *
 * Usage: s3_fleet DIR NODES PROCS. Prints "compiles=C same=S procs=P"
 * (S: the processes that got the reference bytes); exit 0 when every
 * process ran, 1 otherwise. Exit 77 when NVRTC cannot be loaded. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "progcache/cuda.h"
#include "progcache/progcache.h"

static char source[256];
static const char *options[1] = {"-arch=sm_90"};

static void program_init(progcache_program *p)
{
    progcache_program_init(p);
    p->nvrtc.source = source;
    p->nvrtc.options = options;
    p->nvrtc.num_options = 1;
    p->flags = PROGCACHE_PROGRAM_NO_LOAD;
}

/* One process of node dir: after the go byte, compile-or-load. Exit 10 +
 * its compiles (0 or 1) with the reference bytes, 2 with other bytes, 1
 * on an error. */
static int child(const char *dir, int go_fd, const progcache_buf *ref)
{
    char go;
    if (read(go_fd, &go, 1) != 1)
        return 1;
    progcache *c = NULL;
    if (progcache_open(&c, dir, NULL) != PROGCACHE_OK) {
        fprintf(stderr, "s3_fleet: open %s: %s\n", dir, progcache_error_last());
        return 1;
    }
    progcache_program p;
    program_init(&p);
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    if (progcache_compile_or_load(&r, c, &p) != PROGCACHE_OK) {
        fprintf(stderr, "s3_fleet: %s\n", progcache_error_last());
        return 1;
    }
    int miss = r.status == PROGCACHE_STATUS_MISS;
    int same = r.artifact.size == ref->size && !memcmp(r.artifact.data, ref->data, ref->size);
    progcache_program_result_release(&r);
    progcache_close(c); /* waits for the background put to S3 */
    return same ? 10 + miss : 2;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: s3_fleet DIR NODES PROCS\n");
        return 2;
    }
    int nodes = atoi(argv[2]), procs = atoi(argv[3]);
    /* A program no earlier run compiled: the fleet starts cold. */
    snprintf(source, sizeof source,
             "extern \"C\" __global__ void fleet_%ld(float *a) { a[threadIdx.x] += 3.0f; }\n",
             (long)getpid());
    progcache_program p;
    program_init(&p);
    progcache_buf ref = PROGCACHE_BUF_INIT;
    if (progcache_nvrtc_compile(&ref, NULL, NULL, &p.nvrtc) != PROGCACHE_OK) {
        fprintf(stderr, "s3_fleet: no NVRTC here: %s\n", progcache_error_last());
        return 77;
    }
    int go[2];
    if (pipe(go) != 0)
        return 1;
    fflush(NULL);
    for (int i = 0; i < nodes * procs; i++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/node%d", argv[1], i % nodes);
        if (fork() == 0) {
            close(go[1]);
            _exit(child(dir, go[0], &ref));
        }
    }
    close(go[0]);
    for (int i = 0; i < nodes * procs; i++) /* one byte each: all start at once */
        if (write(go[1], "g", 1) != 1)
            return 1;
    close(go[1]);
    int compiles = 0, same = 0, ok = 1, st;
    for (int i = 0; i < nodes * procs; i++) {
        if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) < 10) {
            ok = 0;
            continue;
        }
        same++;
        compiles += WEXITSTATUS(st) - 10;
    }
    printf("compiles=%d same=%d procs=%d\n", compiles, same, nodes * procs);
    progcache_buf_free(&ref);
    return ok ? 0 : 1;
}

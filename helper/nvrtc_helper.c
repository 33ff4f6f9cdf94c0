/* progcache-nvrtc-helper: one NVRTC compile in a fresh process, for the
 * PCH tier (docs/CUDA.md, "Precompiled headers"; the library's side is
 * src/pch/pch_helper.c, the protocol src/pch/pch_wire.h).
 *
 * Why a process of its own: NVRTC restores a precompiled header as a
 * memory image at the address its PCH heap had when the PCH was made, and
 * refuses it (warning #20282) anywhere else. With address-space
 * randomisation every process puts that heap somewhere else, so a PCH made
 * by one process is useless to the next. This program defines mmap
 * (interpose.c): NVRTC
 * (libnvrtc.so) calls mmap through its PLT, and a definition in the
 * executable comes first, so exactly NVRTC's heap request (no address,
 * the heap's size, read-write, private and anonymous) is answered at
 * PROGCACHE__PCH_HEAP_ADDR with MAP_FIXED_NOREPLACE. Everything else passes
 * through unchanged, and randomisation stays on for the rest of the
 * process. If the address is taken the heap goes where the kernel puts it
 * and NVRTC refuses the PCH: slow, never wrong.
 *
 * It also defines (interpose.c) fopen, fopen64, open, __xstat, __lxstat, access and
 * realpath, to record, while a PCH is created, every file NVRTC read and
 * every path it probed: NVRTC never checks that the headers a PCH was made
 * from are unchanged, so the library must, before every use.
 *
 * Started by the library only, with the caller's identity (never setuid);
 * it sets no_new_privs, closes every descriptor above 4, execs nothing and
 * exits after one compile. Exit status: 0 when a response was written. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "pch/pch_wire.h"
#include "interpose.h"
#include "helper_warm.h"

#define DIR_FD 3
#define PCH_FD 4

/* The build ID of the NVRTC this process loaded, in hex. */
static char own_id[80];

/* ---- a growing buffer ----------------------------------------------------------- */

typedef struct buf {
    unsigned char *data;
    size_t size, cap;
} buf;

static int buf_append(void *ctx, const void *data, size_t len)
{
    buf *b = ctx;
    if (len > PROGCACHE__WIRE_MAX_RESPONSE - b->size)
        return -1;
    if (b->size + len > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->size + len)
            cap *= 2;
        unsigned char *d = realloc(b->data, cap);
        if (!d)
            return -1;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->size, data, len);
    b->size += len;
    return 0;
}

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* ---- the request and the compile ------------------------------------------------- */

typedef struct request {
    uint32_t mode, target;
    uint64_t heap_addr, heap_size;
    const char *nvrtc_id, *name, *source, *prefix, *pch_name;
    uint32_t num_options, num_names;
    const char **options, **names;
    const char *warm; /* the name to stay warm under (helper_warm.c), or "" */
    uint32_t warm_ms;
} request;

typedef struct response {
    uint32_t status;
    int32_t nvrtc_result;
    uint32_t pch;
    uint64_t heap_required, create_us, compile_us;
    char nvrtc_id[80];
    buf log, note, artifact, lowered;
} response;

static int read_all(int fd, buf *in)
{
    for (;;) {
        if (in->size == in->cap) {
            if (in->cap >= PROGCACHE__WIRE_MAX_REQUEST)
                return -1;
            size_t cap = in->cap ? 2 * in->cap : 65536;
            unsigned char *d = realloc(in->data, cap);
            if (!d)
                return -1;
            in->data = d;
            in->cap = cap;
        }
        ssize_t n = read(fd, in->data + in->size, in->cap - in->size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            return 0;
        in->size += (size_t)n;
    }
}

static int parse(request *rq, const buf *in)
{
    progcache__wire_in w = {in->data, in->size, 0};
    if (!progcache__wire_header(&w, PROGCACHE__WIRE_REQUEST))
        return -1;
    rq->mode = progcache__wire_u32(&w);
    rq->target = progcache__wire_u32(&w);
    rq->heap_addr = progcache__wire_u64(&w);
    rq->heap_size = progcache__wire_u64(&w);
    rq->nvrtc_id = progcache__wire_str(&w, NULL);
    rq->name = progcache__wire_str(&w, NULL);
    rq->source = progcache__wire_str(&w, NULL);
    rq->prefix = progcache__wire_str(&w, NULL);
    rq->pch_name = progcache__wire_str(&w, NULL);
    rq->num_options = progcache__wire_u32(&w);
    if (w.bad || rq->num_options > w.left / 5)
        return -1;
    rq->options = calloc((size_t)rq->num_options + 3, sizeof *rq->options);
    if (!rq->options)
        return -1;
    for (uint32_t i = 0; i < rq->num_options; i++)
        rq->options[i + 2] = progcache__wire_str(&w, NULL); /* room for two PCH options */
    rq->num_names = progcache__wire_u32(&w);
    if (w.bad || rq->num_names > w.left / 5)
        return -1;
    rq->names = calloc((size_t)rq->num_names + 1, sizeof *rq->names);
    if (!rq->names)
        return -1;
    for (uint32_t i = 0; i < rq->num_names; i++)
        rq->names[i] = progcache__wire_str(&w, NULL);
    rq->warm = progcache__wire_str(&w, NULL);
    rq->warm_ms = progcache__wire_u32(&w);
    if (w.bad || w.left != 0 || rq->mode < PROGCACHE__WIRE_USE ||
        rq->mode > PROGCACHE__WIRE_CREATE_DETACHED || rq->target > 2)
        return -1;
    /* A plain file name in the PCH directory (a detached one's key is its
     * first 64 characters, for <key>.made). */
    if (rq->mode == PROGCACHE__WIRE_CREATE_DETACHED && strlen(rq->pch_name) < 64)
        return -1;
    if ((rq->mode == PROGCACHE__WIRE_CREATE || rq->mode == PROGCACHE__WIRE_CREATE_DETACHED) &&
        (!rq->pch_name[0] || strchr(rq->pch_name, '/') || rq->pch_name[0] == '.' ||
         strlen(rq->pch_name) > 200))
        return -1;
    return 0;
}

static void copy_note(buf *note, const char *text)
{
    size_t n = strnlen(text, PROGCACHE__WIRE_MAX_NOTE);
    note->size = 0;
    (void)buf_append(note, text, n);
}

/* NVRTC's log without the lines --pch-verbose adds ("<name>": using
 * precompiled header file "<path>"), which a compile without a PCH would
 * not have; *used says whether NVRTC said it used the PCH. */
static int keep_log(buf *out, const char *log, int *used)
{
    static const char using_[] = "\": using precompiled header file \"";
    static const char creating[] = "\": creating precompiled header file \"";
    *used = 0;
    out->size = 0;
    for (const char *line = log; *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) + 1 : strlen(line);
        int verbose = 0;
        if (line[0] == '"') {
            const char *u = memmem(line, len, using_, sizeof using_ - 1);
            if (u)
                *used = 1;
            verbose = u || memmem(line, len, creating, sizeof creating - 1);
        }
        if (!verbose && buf_append(out, line, len) != 0)
            return -1;
        line += len;
    }
    return 0;
}

static char *log_of(nvrtcProgram prog)
{
    size_t size = 0;
    if (nvrtcGetProgramLogSize(prog, &size) != NVRTC_SUCCESS || size == 0)
        return strdup("");
    char *log = malloc(size + 1);
    if (log && nvrtcGetProgramLog(prog, log) != NVRTC_SUCCESS)
        log[0] = '\0';
    if (log)
        log[size] = '\0';
    return log;
}

static int fetch_output(response *rs, nvrtcProgram prog, uint32_t target)
{
    size_t size = 0;
    nvrtcResult r = target == 1   ? nvrtcGetPTXSize(prog, &size)
                    : target == 2 ? nvrtcGetLTOIRSize(prog, &size)
                                  : nvrtcGetCUBINSize(prog, &size);
    if (r != NVRTC_SUCCESS)
        return -1;
    char *out = malloc(size ? size : 1);
    if (!out)
        return -1;
    r = size == 0         ? NVRTC_SUCCESS
        : target == 1     ? nvrtcGetPTX(prog, out)
        : target == 2     ? nvrtcGetLTOIR(prog, out)
                          : nvrtcGetCUBIN(prog, out);
    int rc = r == NVRTC_SUCCESS ? buf_append(&rs->artifact, out, size) : -1;
    free(out);
    return rc;
}

static int fetch_lowered(response *rs, nvrtcProgram prog, const request *rq)
{
    for (uint32_t i = 0; i < rq->num_names; i++) {
        const char *lowered = NULL;
        if (nvrtcGetLoweredName(prog, rq->names[i], &lowered) != NVRTC_SUCCESS || !lowered ||
            buf_append(&rs->lowered, lowered, strlen(lowered) + 1) != 0)
            return -1;
    }
    return 0;
}

/* Compile source with the request's options after pre (up to two PCH
 * options, which NVRTC wants first). */
static nvrtcResult compile(nvrtcProgram *prog, const request *rq, const char *source,
                           const char *pre0, const char *pre1, int with_names)
{
    const char **argv = rq->options + 2;
    int argc = (int)rq->num_options;
    if (pre1) {
        *--argv = pre1;
        argc++;
    }
    if (pre0) {
        *--argv = pre0;
        argc++;
    }
    nvrtcResult r = nvrtcCreateProgram(prog, source, rq->name, 0, NULL, NULL);
    if (r != NVRTC_SUCCESS)
        return r;
    for (uint32_t i = 0; with_names && i < rq->num_names; i++)
        if ((r = nvrtcAddNameExpression(*prog, rq->names[i])) != NVRTC_SUCCESS)
            return r;
    return nvrtcCompileProgram(*prog, argc, argv);
}

/* Compile the program, with the PCH at path: the artifact, the log, the
 * lowered names, and whether NVRTC used the PCH. */
static int compile_program(response *rs, const request *rq, const char *pch_path)
{
    char opt[4200];
    snprintf(opt, sizeof opt, "--use-pch=%s", pch_path);
    nvrtcProgram prog = NULL;
    uint64_t t = now_us();
    nvrtcResult r = compile(&prog, rq, rq->source, opt, "--pch-verbose=true", 1);
    rs->compile_us = now_us() - t;
    rs->nvrtc_result = (int32_t)r;
    int rc = 0;
    char *log = prog ? log_of(prog) : strdup("");
    int used = 0;
    if (!log || keep_log(&rs->log, log, &used) != 0)
        rc = -1;
    rs->pch = used ? PROGCACHE__WIRE_PCH_USED : PROGCACHE__WIRE_PCH_REFUSED;
    if (!rc && r == NVRTC_SUCCESS)
        rc = fetch_output(rs, prog, rq->target) || fetch_lowered(rs, prog, rq);
    free(log);
    if (prog)
        nvrtcDestroyProgram(&prog);
    return rc;
}

/* Compile the prefix alone, recording what NVRTC reads; with create, into
 * a PCH named pch_name in the PCH directory. */
static int compile_prefix(response *rs, const request *rq, const char *create)
{
    char opt[4200];
    if (create)
        snprintf(opt, sizeof opt, "--create-pch=%s", create);
    nvrtcProgram prog = NULL;
    uint64_t t = now_us();
    __atomic_store_n(&recording, 1, __ATOMIC_RELAXED);
    nvrtcResult r = compile(&prog, rq, rq->prefix, create ? opt : NULL, NULL, 0);
    __atomic_store_n(&recording, 0, __ATOMIC_RELAXED);
    rs->create_us = now_us() - t;
    rs->nvrtc_result = (int32_t)r;
    char *log = prog ? log_of(prog) : NULL;
    copy_note(&rs->note, log ? log : nvrtcGetErrorString(r));
    free(log);
    int made = r == NVRTC_SUCCESS;
    if (create && prog) {
        nvrtcResult status = nvrtcGetPCHCreateStatus(prog);
        made = made && status == NVRTC_SUCCESS;
        if (status == NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED) {
            size_t need = 0;
            nvrtcGetPCHHeapSizeRequired(prog, &need);
            rs->heap_required = need;
            rs->pch = PROGCACHE__WIRE_PCH_HEAP_SHORT;
        } else if (!made) {
            rs->pch = PROGCACHE__WIRE_PCH_NOT_MADE;
        }
    }
    if (prog)
        nvrtcDestroyProgram(&prog);
    return made ? 0 : -1;
}

static void serve(response *rs, const request *rq)
{
    if (strcmp(rq->nvrtc_id, rs->nvrtc_id) != 0) {
        rs->status = PROGCACHE__WIRE_MISMATCH;
        return;
    }
    main_name = rq->name;
    if (rq->mode == PROGCACHE__WIRE_DEPS) {
        if (compile_prefix(rs, rq, NULL) != 0 && rs->nvrtc_result == NVRTC_SUCCESS)
            rs->status = PROGCACHE__WIRE_FAILED;
        return;
    }
    /* Before NVRTC maps its heap: the size it will ask mmap for. */
    if (rq->heap_size && nvrtcSetPCHHeapSize((size_t)rq->heap_size) != NVRTC_SUCCESS) {
        rs->status = PROGCACHE__WIRE_FAILED;
        return;
    }
    size_t size = 0;
    nvrtcGetPCHHeapSize(&size);
    heap_size = size;
    heap_addr = (uintptr_t)rq->heap_addr;
    char path[256];
    if (rq->mode == PROGCACHE__WIRE_USE) {
        snprintf(path, sizeof path, "/proc/self/fd/%d", PCH_FD);
    } else {
        snprintf(path, sizeof path, "/proc/self/fd/%d/%s", DIR_FD, rq->pch_name);
        if (compile_prefix(rs, rq, path) != 0) {
            unlinkat(DIR_FD, rq->pch_name, 0);
            if (rs->pch == PROGCACHE__WIRE_PCH_NONE)
                rs->pch = PROGCACHE__WIRE_PCH_NOT_MADE;
            return;
        }
    }
    if (compile_program(rs, rq, path) != 0)
        rs->status = PROGCACHE__WIRE_FAILED;
}

static int write_response(const response *rs, int fd)
{
    buf out = {0};
    progcache__wire_out w = {buf_append, &out, 0};
    progcache__wire_put_header(&w, PROGCACHE__WIRE_RESPONSE);
    progcache__wire_put_u32(&w, rs->status);
    progcache__wire_put_u32(&w, (uint32_t)rs->nvrtc_result);
    progcache__wire_put_u32(&w, rs->pch);
    progcache__wire_put_u32(&w, (uint32_t)heap_state);
    progcache__wire_put_u64(&w, rs->heap_required);
    progcache__wire_put_u64(&w, rs->create_us);
    progcache__wire_put_u64(&w, rs->compile_us);
    progcache__wire_put_str(&w, rs->nvrtc_id, strlen(rs->nvrtc_id));
    progcache__wire_put_str(&w, rs->log.data, rs->log.size);
    progcache__wire_put_str(&w, rs->note.data, rs->note.size);
    progcache__wire_put_str(&w, rs->artifact.data, rs->artifact.size);
    progcache__wire_put_str(&w, rs->lowered.data, rs->lowered.size);
    size_t n = deps_overflow ? 0 : num_deps;
    /* An incomplete record is no record: the library then stores nothing. */
    progcache__wire_put_u32(&w, deps_overflow ? UINT32_MAX : (uint32_t)n);
    for (size_t i = 0; i < n; i++) {
        const dep *d = &deps[i];
        progcache__wire_put_u32(&w, (uint32_t)(unsigned char)d->kind);
        progcache__wire_put_u64(&w, (uint64_t)d->st.st_size);
        progcache__wire_put_u64(&w, (uint64_t)(d->st.st_mtim.tv_sec * 1000000000ll +
                                               d->st.st_mtim.tv_nsec));
        progcache__wire_put_u64(&w, (uint64_t)(d->st.st_ctim.tv_sec * 1000000000ll +
                                               d->st.st_ctim.tv_nsec));
        progcache__wire_put_u64(&w, (uint64_t)d->st.st_dev);
        progcache__wire_put_u64(&w, (uint64_t)d->st.st_ino);
        progcache__wire_put_str(&w, d->path, strlen(d->path));
    }
    if (w.bad)
        return -1;
    for (size_t off = 0; off < out.size;) {
        ssize_t k = write(fd, out.data + off, out.size - off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        off += (size_t)k;
    }
    return 0;
}

/* PROGCACHE__WIRE_CREATE_DETACHED (pch_wire.h): this process exits at once
 * and the caller goes on with the artifact it compiled itself; a child
 * makes the PCH and leaves its response in the directory as <key>.made
 * (written under a temp name, then renamed: never seen half written). */
static int detached(response *rs, request *rq)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid > 0 ? 0 : 1;
    (void)setsid(); /* outlives the caller, and its terminal's signals */
    alarm(PROGCACHE__WIRE_DETACHED_SECONDS);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
    }
    rq->mode = PROGCACHE__WIRE_CREATE;
    serve(rs, rq);
    /* The PCH synced here, off every compile's path: the compile that
     * publishes it syncs it again (pch_dir.c), which then finds nothing
     * to write (a fresh 178 MB PCH took 70 ms to sync on the build
     * machine, on the critical path of that compile). */
    int pch = openat(DIR_FD, rq->pch_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (pch >= 0) {
        (void)fsync(pch);
        close(pch);
    }
    rs->artifact.size = 0;
    rs->lowered.size = 0;
    char tmp[32], made[80];
    snprintf(tmp, sizeof tmp, "tmp-%08x%08x", (unsigned)getpid(), (unsigned)now_us());
    snprintf(made, sizeof made, "%.64s.made", rq->pch_name);
    char making[80];
    snprintf(making, sizeof making, "%.64s.making", rq->pch_name);
    int fd = openat(DIR_FD, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        unlinkat(DIR_FD, making, 0);
        return 1;
    }
    char head[300];
    int n = snprintf(head, sizeof head, PROGCACHE__WIRE_MADE "\n%s\n", rq->pch_name);
    int ok = write(fd, head, (size_t)n) == n && write_response(rs, fd) == 0 && fsync(fd) == 0;
    close(fd);
    if (!ok || renameat(DIR_FD, tmp, DIR_FD, made) != 0) {
        unlinkat(DIR_FD, tmp, 0);
        unlinkat(DIR_FD, rq->pch_name, 0);
        ok = 0;
    }
    /* The creation is over: another may start (the marker is the
     * library's claim that one runs, pch_detach.c). */
    unlinkat(DIR_FD, making, 0);
    return ok ? 0 : 1;
}

/* A warm helper's child (helper_warm.c): one compile with a PCH, from conn. */
static int serve_warm(int conn)
{
    buf in = {0};
    request rq;
    response rs;
    memset(&rq, 0, sizeof rq);
    memset(&rs, 0, sizeof rs);
    memcpy(rs.nvrtc_id, own_id, sizeof own_id);
    /* Only what it stayed warm for: a compile with a PCH, on the heap it
     * has (the library's name for it says which). */
    if (read_all(conn, &in) != 0 || parse(&rq, &in) != 0 || rq.mode != PROGCACHE__WIRE_USE ||
        rq.heap_size != heap_size || rq.heap_addr != heap_addr)
        rs.status = PROGCACHE__WIRE_BAD_REQUEST;
    else
        serve(&rs, &rq);
    int rc = write_response(&rs, conn);
    (void)shutdown(conn, SHUT_WR);
    return rc;
}

int main(void)
{
    /* Nothing this process runs may gain privileges, and it holds only
     * what the library handed it. */
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    /* What NVRTC writes (the PCH, its temp files) is this user's alone,
     * whatever the caller's umask (docs/FORMAT.md: mode 0600). */
    umask(077);
    if (syscall(SYS_close_range, 5u, ~0u, 0u) != 0)
        for (int fd = 5; fd < 1024; fd++)
            close(fd);

    response rs;
    memset(&rs, 0, sizeof rs);
    unsigned char id[64];
    size_t id_len = progcache__wire_build_id("nvrtcVersion", id, sizeof id);
    for (size_t i = 0; i < id_len && i < 32; i++)
        snprintf(own_id + 2 * i, 3, "%02x", id[i]);
    memcpy(rs.nvrtc_id, own_id, sizeof own_id);

    buf in = {0};
    request rq;
    memset(&rq, 0, sizeof rq);
    if (read_all(0, &in) != 0 || parse(&rq, &in) != 0)
        rs.status = PROGCACHE__WIRE_BAD_REQUEST;
    else if (rq.mode == PROGCACHE__WIRE_CREATE_DETACHED)
        return detached(&rs, &rq);
    else
        serve(&rs, &rq);
    if (write_response(&rs, 1) != 0)
        return 1;
    /* The answer is whole: say so now. Without this the library would see
     * the end of it only when this process's exit has torn down NVRTC's
     * heap and the PCH's pages (50-80 ms on the H200 machine), after the
     * compile was done. */
    (void)shutdown(1, SHUT_WR);
    /* Asked to stay warm, after a compile that used its PCH on the pinned
     * heap: a template for the next ones (helper_warm.c); this process exits. */
    if (rq.mode == PROGCACHE__WIRE_USE && rs.status == PROGCACHE__WIRE_OK &&
        rs.pch == PROGCACHE__WIRE_PCH_USED && heap_state == PROGCACHE__WIRE_HEAP_PINNED &&
        rq.warm && rq.warm[0])
        progcache__helper_warm(rq.warm, rq.warm_ms, serve_warm);
    return 0;
}

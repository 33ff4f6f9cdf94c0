/* Internal: the PCH tier's parts, shared by src/pch/pch_*.c and nothing
 * else (compile-or-load sees only pch.h). docs/CUDA.md, "Precompiled
 * headers", says what the tier does; docs/FORMAT.md its files.
 *
 *   pch_compile.c   the decisions: use, create, or compile as before
 *   pch_tier.c      the per-handle state and its settings
 *   pch_detach.c    making a PCH off the critical path
 *   pch_inproc.c    PCHs of one process, when the helper cannot share them
 *   pch_warm.c      a warm helper
 *   pch_judge.c     the plain compile; what a helper made, judged and kept
 *   pch_log.c       logging once, counting, dropping a feature: called by all
 * Calls go down this list (pch_compile.c, the entry, at the top), never up:
 * tests/layers checks the objects of the library, not this order inside a
 * room, so keep it by hand.
 *
 * The tier's other parts, used by those above:
 *   pch_prefix.c    the leading #include block of a program and the PCH key
 *   pch_manifest.c  what a PCH was made from, and checking it still holds
 *   pch_verify.c    the PCH file's bytes: SHA-256, skipped while its stamp holds
 *   pch_dir.c       progcache/pch-<uid>/: finding, publishing, the budget
 *   pch_helper.c    running the compile helper (helper/nvrtc_helper.c) */
#ifndef PROGCACHE_CUDA_PCH_TIER_H
#define PROGCACHE_CUDA_PCH_TIER_H

#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "config.h"
#include "pch/pch_settings.h"
#include "error.h"
#include "progcache/cuda.h"
#include "progcache/stats.h"
#include "progcache/store.h"

#define PCH_KEY_HEX 64
/* "<64 hex>-<16 hex>.pch" and NUL. */
#define PCH_NAME_MAX 96
#define PCH_ID_HEX 80
/* "progcache-pch-<uid>-<32 hex>": a warm helper's name (pch_warm.c). */
#define PCH_WARM_NAME_MAX 64

/* ---- the per-handle state (pch_tier.c) ------------------------------------ */

/* What has been logged once per handle. */
enum {
    PCH_LOGGED_SETTINGS = 1u << 0,
    PCH_LOGGED_DIR = 1u << 1,
    PCH_LOGGED_HELPER = 1u << 2,
    PCH_LOGGED_MISMATCH = 1u << 3,
    PCH_LOGGED_NOPIN = 1u << 4,
    PCH_LOGGED_BUDGET = 1u << 5,
    PCH_LOGGED_INPROC = 1u << 6,
    PCH_LOGGED_WARM = 1u << 7
};

typedef struct pch_inproc pch_inproc;

typedef struct progcache__pch_tier {
    pthread_mutex_t lock; /* logged, cross, inproc's table */
    progcache__pch_settings settings;
    char *settings_error; /* why the settings turned the tier off, or NULL */
    int dir_fd;           /* progcache/pch-<uid>, or -1 */
    char *dir;            /* its path */
    char *dir_error;      /* why there is none, or NULL */
    char nvrtc_id[PCH_ID_HEX];    /* hex build ID of this process's libnvrtc */
    char builtins_id[PCH_ID_HEX]; /* ... of libnvrtc-builtins next to it, or "" */
    int nvrtc_major, nvrtc_minor;
    /* 1 when the IDs were read from the NVRTC file a record names, NVRTC
     * not loaded (pch_prefix.c): a compile through the helper need not
     * load it here. */
    int ids_from_file;
    unsigned int logged; /* PCH_LOGGED_* */
    char *helper;        /* the helper's path, or NULL */
    int helper_fd;       /* it, opened and checked once (O_PATH), run from it; or -1 */
    char *helper_error;  /* why there is none, or NULL */
    /* 1 while PCHs are shared through the helper; 0 once the helper
     * cannot pin NVRTC's heap (or PROGCACHE_PCH=inprocess): the tier then
     * keeps PCHs in this process only (pch_inproc.c), still asking the
     * helper what NVRTC reads. */
    int cross;
    /* 1 while the helper can run compiles for this process: 0 when there
     * is none, or it loads another build of NVRTC. Then the tier is off. */
    int helper_ok;
    /* 1 while compiles with a PCH may go to a warm helper (pch_warm.c): 0
     * with PROGCACHE_PCH_WARM=0, or once one did not answer. */
    int warm_ok;
    pch_inproc *inproc;
    /* The cache's log callback: what log_once tells when the program has
     * none, so a tier that is off says why to the tools and the sample
     * (they give the cache one, not each program). */
    progcache_log_fn cache_log;
    void *cache_log_ctx;
} progcache__pch_tier;

/* The tier's state for cache (made at the first call); NULL when the
 * cache is NULL or out of memory. */
progcache__pch_tier *progcache__pch_tier_of(progcache *cache);

/* (pch_log.c) Pass a message to the program's log callback once per handle: bit is
 * one of PCH_LOGGED_*. Returns whether this call logged it. */
int progcache__pch_log_once(progcache__pch_tier *tier, const progcache_program *program,
                            unsigned int bit, int level, const char *fmt, ...)
    PROGCACHE_PRINTF(5, 6) PROGCACHE_COLD;
void progcache__pch_log(const progcache_program *program, int level, const char *fmt, ...)
    PROGCACHE_PRINTF(3, 4) PROGCACHE_COLD;

/* ---- one compile's candidate (pch_compile.c fills it) --------------------- */

typedef struct pch_job {
    progcache *cache;
    const progcache_program *program;
    progcache__pch_tier *tier;
    /* Where the key's NVRTC version came from (nvrtc_record.h's *how), or
     * NULL: the caller's. */
    const char *how;
    const char *source; /* the program's source, NUL-terminated */
    size_t source_len;
    size_t prefix_len;  /* source[0, prefix_len): the leading directives */
    double tier_ms;     /* finding the tier's state (made at a handle's first compile) */
    const char *name;   /* the program's name, as NVRTC gets it */
    const char **argv;  /* NVRTC's options, as progcache_nvrtc_compile passes them */
    size_t argc;
    /* Where the lowered names of the program's name expressions go (as
     * progcache_nvrtc_compile's lowered_names), or NULL: not wanted. */
    progcache_buf *lowered;
    unsigned char key[32];
    char hex[PCH_KEY_HEX + 1]; /* the PCH key, in hex */
    /* The name a helper started for this compile stays warm under (its
     * request's warm name, pch_warm.c), or NULL: it exits. */
    const char *warm;
} pch_job;

/* ---- the prefix and the key (pch_prefix.c) -------------------------------- */

/* The length of source's leading block of #include (and #define, #undef,
 * #pragma) directives, blank lines and comments, up to the end of its last
 * #include line; 0 when it has no #include. */
size_t progcache__pch_prefix_len(const char *source, size_t len);

/* job->key and job->hex from everything that makes a PCH valid: NVRTC's
 * build, the heap address, the target, the options, the prefix's bytes. */
int progcache__pch_key(pch_job *job);

/* This process's libnvrtc build ID and its builtins' (hex) into tier. */
void progcache__pch_ids(progcache__pch_tier *tier);

/* ---- what a PCH was made from (pch_manifest.c) ---------------------------- */

typedef struct pch_dep {
    char kind; /* '+' a file, 'd' a directory, '-' must stay absent */
    uint64_t size;
    int64_t mtime_ns, ctime_ns;
    uint64_t dev, ino;
    unsigned char sha256[32]; /* '+' only */
    char *path;
} pch_dep;

typedef struct pch_manifest {
    char key[PCH_KEY_HEX + 1];
    char pch[PCH_NAME_MAX]; /* the PCH file's name in the directory */
    uint64_t pch_size;
    unsigned char pch_sha[32]; /* SHA-256 of the PCH file */
    uint64_t heap_addr, heap_size;
    uint64_t plain_ms; /* a compile without the PCH, when it was made */
    uint64_t use_ms;   /* the first compile with it */
    int64_t created;   /* seconds since 1970 */
    pch_dep *deps;
    size_t num_deps;
} pch_manifest;

void progcache__pch_manifest_free(pch_manifest *m);
/* Parse the text of a manifest (checking its own digest). PROGCACHE_OK or
 * PROGCACHE_ECORRUPT with a message saying what is wrong. */
int progcache__pch_manifest_parse(pch_manifest *out, const char *text, size_t len);
/* The text of a manifest, ending in its own digest. */
int progcache__pch_manifest_format(progcache_buf *out, const pch_manifest *m);

/* Whether the files m was made from are as they were: a stat per path; a
 * file whose stat differs is read and hashed again. 0: all hold (*moved
 * is set when a file's stat changed but not its bytes: the manifest can
 * be written again with the new stat); 1: stale, why says which path and
 * how; negative: out of memory. */
int progcache__pch_deps_check(pch_manifest *m, char *why, size_t why_len, int *moved);
/* At creation: hash every '+' file, and check that its stat is still the
 * one the helper saw when NVRTC opened it (else NVRTC may have read other
 * bytes than were hashed). 0, or 1 with why. */
int progcache__pch_deps_hash(pch_manifest *m, char *why, size_t why_len);

/* ---- the PCH file's bytes (pch_verify.c) ---------------------------------- */

/* A file's identity: what changes when its bytes can have (a write, a
 * truncation, a copy or restore over it, another file in its place). */
typedef struct pch_ident {
    uint64_t dev, ino, size;
    int64_t mtime_ns, ctime_ns;
} pch_ident;
void progcache__pch_ident_of(pch_ident *out, const struct stat *st);
int progcache__pch_ident_same(const pch_ident *a, const pch_ident *b);

/* SHA-256 of the whole file fd (size bytes). 0, or -1 with errno (a file
 * shorter than size: EIO). */
int progcache__pch_digest(int fd, uint64_t size, unsigned char out[32]);
/* How many full reads progcache__pch_digest made in this process (tests). */
extern unsigned long progcache__pch_full_checks;

/* Whether fd (the PCH file pch in dir_fd, to be used through fd) holds the
 * bytes whose SHA-256 is sha: at once when the stamp <key>.stamp vouches
 * for fd's identity as it is now, else by reading it in full (*full set),
 * after which the stamp is written. 0 intact; 1 damaged (another size,
 * short, other bytes); -1 with errno when it could not be told. */
int progcache__pch_verify(int dir_fd, int fd, const char *pch, uint64_t size,
                          const unsigned char sha[32], int *full);
/* The stamp of pch: 1 with the identity it vouches for (a stamp of this
 * user, nobody else can write, exactly as progcache writes it for pch and
 * sha), else 0. */
int progcache__pch_stamp_read(int dir_fd, const char *pch, const unsigned char sha[32],
                              pch_ident *out);
/* Write (replace) the stamp of pch: its bytes, checked, are sha's at id. */
void progcache__pch_stamp_write(int dir_fd, const char *pch, const unsigned char sha[32],
                                const pch_ident *id);
void progcache__pch_stamp_remove(int dir_fd, const char *pch);
/* Mark pch (open as fd) used now, for eviction: its stamp's times (the
 * PCH's access time when it has no stamp; see pch_verify.c). */
void progcache__pch_touch(int dir_fd, const char *pch, int fd);

/* ---- the directory (pch_dir.c) -------------------------------------------- */

/* Open (creating) <cache>/progcache/pch-<uid> through the home store,
 * which owns the directory's layout (progcache__store_open_private_dir): a
 * directory of this user, mode 0700, reached without following links. On
 * failure tier->dir_error says why (naming cache_dir) and dir_fd stays -1. */
void progcache__pch_dir_open(progcache__pch_tier *tier, progcache_store *home,
                             const char *cache_dir);

/* A usable PCH for job: its manifest and an open descriptor of its file,
 * checked (deps, size, SHA-256 or its stamp). */
typedef struct pch_found {
    pch_manifest manifest;
    int fd;
    int full;       /* its file was read in full (no stamp vouched for it) */
    double find_ms; /* what finding and checking it took */
} pch_found;
enum { PCH_NONE = 0, PCH_FOUND = 1, PCH_STALE = 2 };
/* PCH_FOUND (out filled; release with progcache__pch_found_release),
 * PCH_NONE, or PCH_STALE (why says why; the PCH was removed). */
int progcache__pch_find(pch_found *out, const pch_job *job, char *why, size_t why_len);
void progcache__pch_found_release(pch_found *f);

/* Remove the PCH named in the manifest of key hex, if the manifest still
 * names it (another process may have published a new one meanwhile). */
void progcache__pch_remove(progcache__pch_tier *tier, const char *hex, const char *pch_name);

/* Publish a PCH the helper made in the directory as m->pch: fsync it, then
 * link the manifest in (never over another process's). PROGCACHE_OK, or
 * an error (the PCH file is then removed). */
int progcache__pch_publish(progcache__pch_tier *tier, const pch_manifest *m);
/* Write the manifest again over the old one (new stats, same PCH). */
void progcache__pch_republish(progcache__pch_tier *tier, const pch_manifest *m);

/* A fresh file name for a PCH of key hex. */
void progcache__pch_new_name(char out[PCH_NAME_MAX], const char *hex);

/* The record of a prefix seen without a PCH: how long its plain compile
 * took and the heap its creation needs. */
typedef struct pch_seen {
    uint64_t plain_ms;
    uint64_t heap_required;
    int no_pay;   /* a PCH made for it was not worth its cost */
    int failures; /* creations that failed */
} pch_seen;
/* 1 when there is a record (out filled), 0 when none. */
int progcache__pch_seen_read(progcache__pch_tier *tier, const char *hex, pch_seen *out);
void progcache__pch_seen_write(progcache__pch_tier *tier, const char *hex, const pch_seen *seen);

/* The marker that this NVRTC build cannot have its heap pinned. */
int progcache__pch_nopin_read(progcache__pch_tier *tier);
void progcache__pch_nopin_write(progcache__pch_tier *tier);

/* Keep the directory's PCHs within the budget (least recently used go
 * first, never keep), and sweep what crashed processes left. A no-op
 * while another process does it. */
void progcache__pch_evict(progcache__pch_tier *tier, const char *keep);

/* ---- the helper (pch_helper.c) -------------------------------------------- */

/* Find the helper: tier->helper, or tier->helper_error saying why not. */
void progcache__pch_helper_find(progcache__pch_tier *tier);
/* Open the helper found, once: tier->helper_fd, checked on that
 * descriptor and run from it (so nothing can be swapped in between), or
 * tier->helper NULL and tier->helper_error saying why. */
void progcache__pch_helper_open(progcache__pch_tier *tier);
/* The build tree's helper when this library runs from the build tree it
 * was built in, else NULL (pch_helper_where.c). */
const char *progcache__pch_helper_in_build(void);

typedef struct pch_result {
    uint32_t status;      /* PROGCACHE__WIRE_OK, ... */
    int32_t nvrtc_result; /* nvrtcResult of the compile */
    uint32_t pch;         /* PROGCACHE__WIRE_PCH_* */
    uint32_t heap;        /* PROGCACHE__WIRE_HEAP_* */
    uint64_t heap_required, create_us, compile_us;
    char nvrtc_id[PCH_ID_HEX];
    progcache_buf log, note, artifact, lowered;
    pch_manifest deps; /* only deps and num_deps are filled */
    int deps_incomplete;
    double wall_ms;   /* spawn to reaped exit */
    double answer_ms; /* spawn to the first byte of its answer */
    double eof_ms;    /* spawn to the end of its answer */
} pch_result;

void progcache__pch_result_release(pch_result *r);

/* A helper at work (progcache__pch_helper_start), to be finished. */
/* How long a helper may run before it is killed (10 minutes; tests
 * shorten it). */
extern unsigned int progcache__pch_helper_timeout_ms;

typedef struct pch_call {
    const char *helper;
    pid_t pid;
    int sock;
    int talked; /* -1: the request could not be sent in time */
    double start, deadline;
    double answer; /* when the first byte of the answer came, or 0 */
} pch_call;

/* Run one compile in the helper: mode PROGCACHE__WIRE_*, pch_fd the PCH to
 * use (USE), pch_name the file to create in the directory (CREATE), heap
 * its size (0: NVRTC's default). PROGCACHE_OK when the helper answered
 * (out filled: what it did is in out->status and out->pch);
 * PROGCACHE_ENOTFOUND when there is no usable helper; otherwise an error
 * saying what went wrong (could not start, died of a signal, timed out,
 * answered nonsense). */
int progcache__pch_helper_run(pch_result *out, const pch_job *job, uint32_t mode, int pch_fd,
                              const char *pch_name, uint64_t heap);
/* The same in two steps, so the caller can work while the helper does:
 * start returns once the request is sent (PROGCACHE_ENOTFOUND, or an error
 * when the helper could not be started: nothing to finish then); finish
 * waits for the answer and reaps the helper, returning what run would. */
int progcache__pch_helper_start(pch_call *call, const pch_job *job, uint32_t mode, int pch_fd,
                                const char *pch_name, uint64_t heap);
int progcache__pch_helper_finish(pch_result *out, pch_call *call);

/* The parts, for a warm helper (pch_warm.c): the request for job; sending
 * it (then shutting the socket's sending side: 0, -1 on the deadline); and
 * reading the response to EOF (0; -1 on the deadline; -2 too long or the
 * socket failed; *first: when its first byte came). */
int progcache__pch_request(progcache_buf *out, const pch_job *job, uint32_t mode,
                           const char *pch_name, uint64_t heap);
int progcache__pch_send(int sock, const progcache_buf *req, double deadline);
int progcache__pch_receive(int sock, progcache_buf *resp, double deadline, double *first);

/* ---- a warm helper (pch_warm.c) -------------------------------------------- */

/* A compile with the PCH on pch_fd (USE), as progcache__pch_helper_run:
 * through the warm helper when one is running (pch_warm), otherwise, or
 * when it does not answer (pch_warm_failures), through a fresh helper,
 * which is asked to stay warm when none was running; a warm helper that
 * took the request and ran past the helper's deadline is that deadline's
 * PROGCACHE_ETIMEOUT, with no second helper. PROGCACHE_PCH_WARM=0 turns
 * the warm helper off. */
int progcache__pch_helper_use(pch_result *out, pch_job *job, int pch_fd, uint64_t heap);

/* ---- in-process PCHs (pch_inproc.c) --------------------------------------- */

/* Compile job in this process with a PCH this process made (making it on
 * the second sight of its prefix, with the helper recording what it reads).
 * Returns like progcache_nvrtc_compile. */
int progcache__pch_inproc_compile(progcache_buf *out, progcache_buf *log, pch_job *job);
void progcache__pch_inproc_free(pch_inproc *inproc);

/* ---- the decisions (pch_judge.c) ------------------------------------------ */

/* The helper failed to run a compile (what: "using a PCH"): said once,
 * counted, and the helper is not asked again for this handle. */
void progcache__pch_helper_failed(pch_job *job, const char *what);
/* The helper loads another build of NVRTC than this process (r): said
 * once, counted, and the tier is off for this handle. */
void progcache__pch_mismatch(pch_job *job, const pch_result *r);

/* The plain compile and the seen record, shared with pch_inproc.c: compile
 * in this process without a PCH, and remember the prefix if it is slow. */
int progcache__pch_plain(progcache_buf *out, progcache_buf *log, pch_job *job);
/* NVRTC in this process, checked to be the one the key was derived for
 * (progcache__nvrtc_for_compile): before any compile here. */
int progcache__pch_nvrtc_here(const pch_job *job);
/* Compile job in this process without a PCH, as progcache_nvrtc_compile. */
int progcache__pch_here(progcache_buf *out, progcache_buf *log, pch_job *job);

/* What a helper's CREATE answered (r), for the PCH it made as name: kept
 * and published (3), made but not kept (2), or not made (1); the seen
 * record and the counters are updated, the log told. */
int progcache__pch_judge(pch_job *job, pch_seen *seen, pch_result *r, const char *name);

/* ---- making PCHs off the critical path (pch_detach.c) ---------------------- */

/* After job's plain compile: start a detached helper that makes the PCH of
 * its prefix (one per prefix at a time: <key>.making), and count it
 * (pch_deferred). Never fails the compile; a helper that cannot start is
 * logged once. */
void progcache__pch_create_detached(pch_job *job, const pch_seen *seen);
/* The same, started by a thread once a plain compile of job has taken
 * PROGCACHE_PCH_MIN_MS (a compile that is proving slow), while it still
 * runs: early_start before the compile (NULL when the thread cannot be
 * had: then nothing starts early), early_stop after it, which returns 1
 * when the thread tried to start the creation (its outcome then counted
 * and logged here, on the caller's thread, as create_detached does). */
typedef struct pch_early pch_early;
pch_early *progcache__pch_early_start(pch_job *job, const pch_seen *seen);
int progcache__pch_early_stop(pch_early *early);
/* A detached creation of job's prefix that has finished (<key>.made):
 * claimed (one process only), judged and published. 1 when a PCH was
 * published, else 0. */
int progcache__pch_collect(pch_job *job, pch_seen *seen);

/* Parse a helper's response (as pch_helper.c reads it from the socket). 0,
 * or -1 when it is not one. */
int progcache__pch_result_parse(pch_result *out, const progcache_buf *data);
/* Finish a call started with PROGCACHE__WIRE_CREATE_DETACHED: no answer
 * comes; the helper exits at once and is reaped here (killed after 5 s).
 * PROGCACHE_OK, or an error saying how it ended. */
int progcache__pch_helper_detach(pch_call *call);

/* Count n of stat in the cache's statistics. */
void progcache__pch_count(const pch_job *job, progcache_stat stat, uint64_t n);

/* Turn a part of the tier off for this handle (cross or helper_ok: set at
 * the first use, then only ever cleared, atomically). */
void progcache__pch_tier_drop(progcache__pch_tier *tier, int *field);

#endif

/*
 * progcache/remote.h - a cache shared by many machines: the Redis store,
 * its counters, and cross-node single-flight leases.
 *
 * The Redis store is a progcache_store (progcache/sys/store.h) named
 * "redis". Put it below the local tiers (memory -> files -> Redis) and a
 * node that misses locally reads what another node compiled; a remote hit
 * is copied into the local tiers. docs/REMOTE.md is the guide;
 * docs/SECURITY.md says why a shared cache of GPU code needs a secret.
 *
 * The store never makes the cache fail because Redis does:
 *  - get returns PROGCACHE_ENOTFOUND (a miss) when Redis is unreachable,
 *    slow beyond the timeouts, or holds a value that fails its checks;
 *  - put returns PROGCACHE_OK when the value could not be written (only bad
 *    arguments fail it); by default it only queues the value, and a
 *    background thread writes it (progcache_redis_flush waits for that);
 *  - after a few failures in a row, the store stops trying for a while
 *    (back-off), so a dead server costs nothing per call.
 * Every such event is counted (progcache_redis_counters_get).
 *
 * Built only when hiredis was found at build time. Otherwise every function
 * here exists and returns PROGCACHE_EREMOTE ("built without hiredis").
 *
 * Thread and process safety: a store may be used by many threads at once.
 * Do not carry a store across fork(): the child must create its own.
 */
#ifndef PROGCACHE_REMOTE_H
#define PROGCACHE_REMOTE_H

#include "common.h"
#include "store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ===========================================================================
 * The Redis store
 * ======================================================================== */

typedef struct progcache_redis_options {
    unsigned int version; /* PROGCACHE_REDIS_OPTIONS_VERSION */

    /* Where the server is. Required.
     *   redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]   port 6379, db 0 by default;
     *       HOST may be a name, an IPv4 address or [IPv6]; USER and PASSWORD
     *       may be percent-encoded (%40 for '@').
     *   unix:/path/to/socket[?db=N][&user=U][&password=P]  (also unix:///path)
     * rediss:// (TLS) is refused: progcache uses hiredis without its TLS
     * support; reach a TLS server through a local tunnel (stunnel or
     * socat; docs/REMOTE.md, "TLS"). The password never appears in
     * messages. */
    const char *url;

    /* Prepended to every Redis key name; NULL or "": "progcache:". At most
     * 200 bytes. Stores with different prefixes never see each other's
     * entries. */
    const char *key_prefix;

    /* Bound on establishing a connection (the TCP connect), and the
     * deadline of each command on it, the whole exchange (extended only by
     * the bytes moved, at min_rate); 0: 100 ms each. A call is then bounded
     * by about connect + 3 x command (a new connection's AUTH and SELECT,
     * then the command). */
    unsigned int connect_timeout_ms;
    unsigned int command_timeout_ms;

    /* Expiry of stored entries in seconds (SET ... EX); 0: none. For a size
     * cap, configure the server (maxmemory + maxmemory-policy allkeys-lru;
     * docs/REMOTE.md). */
    unsigned int ttl_seconds;

    /* A shared secret for authenticated entries; NULL/0: none. With a
     * secret, every value written carries an HMAC-SHA256 tag over the cache
     * key, the envelope, the records and the payload, and a value read
     * without a valid tag is rejected
     * (a miss, counted). At least PROGCACHE_REDIS_MIN_SECRET (16) bytes: a
     * shorter one is refused (PROGCACHE_EINVAL), never used or dropped;
     * 32 random bytes are best. Not referenced after
     * progcache_store_redis_new returns. */
    const void *secret;
    size_t secret_len;

    unsigned int flags; /* PROGCACHE_REDIS_* below */

    /* Back-off: after this many failed calls in a row (0: 3) the store
     * stops contacting the server for backoff_ms (0: 5000); calls in that
     * period return at once (get: a miss; put: dropped). After it, one
     * failure switches the store off again; one success resets the count. */
    unsigned int failures_before_backoff;
    unsigned int backoff_ms;

    /* Bytes of values waiting in the background put queue at most; 0:
     * 64 MiB. A put that would exceed it is dropped (counted). */
    uint64_t max_queue_bytes;

    /* Told about failures, back-off and rejected values (WARN), since the
     * calls themselves report them only as misses. Optional; called from
     * any thread, including the background put thread. */
    progcache_log_fn log;
    void *log_ctx;

    /* Version 2. The largest value written or read, in bytes (the payload,
     * without the envelope); 0: PROGCACHE_MAX_ARTIFACT_SIZE_DEFAULT. */
    uint64_t max_artifact_size;

    /* Version 3. The slowest transfer a command's deadline allows, in bytes
     * per second; 0: PROGCACHE_REDIS_MIN_RATE_DEFAULT (1 MiB/s). Each
     * command (and AUTH, SELECT) must be done within command_timeout_ms
     * plus the bytes it has moved so far at this rate: a large value on a
     * link at least this fast is never cut, a server that drips its reply
     * is stopped after about command_timeout_ms (docs/SECURITY.md). */
    uint64_t min_rate;
} progcache_redis_options;

#define PROGCACHE_REDIS_MIN_RATE_DEFAULT (UINT64_C(1) << 20)

/* Never write to Redis: put is a no-op returning PROGCACHE_OK, remove
 * returns PROGCACHE_ENOTFOUND, clear does nothing, no lease is taken. */
#define PROGCACHE_REDIS_READONLY 0x1u
/* Write in the calling thread: put returns after Redis answered (or the
 * write failed). Default: put queues the value and returns at once. */
#define PROGCACHE_REDIS_SYNC_PUT 0x2u

/* The shortest shared secret accepted, in bytes: HMAC is only as strong
 * as its key. */
#define PROGCACHE_REDIS_MIN_SECRET 16

#define PROGCACHE_REDIS_OPTIONS_VERSION 3
#define PROGCACHE_REDIS_OPTIONS_INIT \
    PROGCACHE__INIT(progcache_redis_options, PROGCACHE_REDIS_OPTIONS_VERSION)

/*
 * progcache_default_remote() : the remote tier named by the environment,
 * for progcache_open() and the progcache command (docs/CONFIG.md):
 * $PROGCACHE_REMOTE is the URL, and $PROGCACHE_REMOTE_SECRET_FILE, if set,
 * a file whose bytes (one trailing newline dropped) are the shared secret.
 *
 * A secret file that is named but cannot be used is an error, never "no
 * secret" (docs/SECURITY.md): missing or unreadable, not a regular file (a
 * FIFO or device is neither waited on nor read), readable or writable by
 * every user (mode o+r or o+w; group access is allowed, for a secret
 * shared by a group), reached through a directory another user owns or
 * can write (it is opened through checked directories and read through the
 * descriptor it was checked on: docs/SECURITY.md, "Paths that are
 * trusted"), empty or under PROGCACHE_REDIS_MIN_SECRET bytes, or over 4096
 * bytes. PROGCACHE_REMOTE_SECRET_FILE without PROGCACHE_REMOTE is
 * not read (there is no remote tier to authenticate).
 *
 * @param url    [out] the URL as a NUL-terminated string.
 * @param secret [out] the secret's bytes; size 0 only when
 *               PROGCACHE_REMOTE_SECRET_FILE is unset or empty. Wipe it
 *               (memset data, capacity bytes) before freeing.
 * @return PROGCACHE_OK; PROGCACHE_ENOTFOUND when PROGCACHE_REMOTE is unset
 *         or empty (no message); PROGCACHE_EINVAL when the secret file is
 *         unusable as above, PROGCACHE_EIO when it cannot be opened or read
 *         (either way the message is "PROGCACHE_REMOTE_SECRET_FILE <path>
 *         <why>"); PROGCACHE_ENOMEM.
 */
PROGCACHE_API int progcache_default_remote(progcache_buf *url, progcache_buf *secret);

/*
 * progcache_remote_secret_read() : the shared secret in the file at path,
 * with the checks progcache_default_remote() makes on
 * PROGCACHE_REMOTE_SECRET_FILE (for a program or tool that takes the file
 * as an argument: `progcache remote --secret-file`). Messages name it
 * "secret file <path>".
 * @param secret [out] the bytes; wipe them before freeing.
 * @return PROGCACHE_OK, PROGCACHE_EINVAL, PROGCACHE_EIO or PROGCACHE_ENOMEM
 *         as progcache_default_remote() does for the file.
 */
PROGCACHE_API int progcache_remote_secret_read(progcache_buf *secret, const char *path);

/*
 * progcache_url_mask() : url as a message may show it, every secret in it
 * replaced by "***": the password of scheme://USER:PASSWORD@HOST (up to
 * the last '@', whatever it holds; all of the credentials when they have
 * no ':'), and in a unix: URL the value of every query item but db= and
 * user=. What progcache itself prints about a URL is built from this form.
 * Written into out, size bytes, cut to fit; NULL-safe.
 */
PROGCACHE_API void progcache_url_mask(char *out, size_t size, const char *url);

/* progcache_redis_options_init() : set opts to its defaults. NULL-safe. */
PROGCACHE_API void progcache_redis_options_init(progcache_redis_options *opts);

/*
 * progcache_store_redis_new() : a store on a Redis server. CONSTRUCTOR.
 *
 * Nothing is contacted here: connections are made on first use, and a
 * server that is down makes misses, not a failure to open (so a cluster
 * keeps working while its cache server restarts).
 *
 * Keys: an entry for key bytes K is the Redis string
 * <prefix><hex SHA-256(K)>, its value an envelope checked on every read:
 * format version, the entry's kind and records (progcache_entry_meta, so a
 * remote hit brings them along), lengths, a SHA-256 over K's hash, the
 * records and the payload (so a value copied under another key's name is
 * rejected), an optional HMAC tag, then the payload (docs/REMOTE.md).
 * progcache_store_get_meta() reports PROGCACHE_SEAL_MATCHED for a value
 * that passed these checks and PROGCACHE_SEAL_NONE for one written by an
 * older progcache (which bound no key); never PROGCACHE_SEAL_WHOLE, since
 * the writer's word on the bytes' structure comes from another machine.
 * A value written by a newer progcache is a miss (counted: newer).
 * count and total_size SCAN the key space (slow on a large server: for
 * tools, not for the hot path); clear deletes every key under the prefix.
 *
 * @param out  [out] the store; release with progcache_store_free(), which
 *             first writes what the put queue holds.
 * @param opts the options; url is required.
 * @return PROGCACHE_OK; PROGCACHE_EINVAL (no url, a malformed url, a
 *         rediss:// url, a prefix over 200 bytes, a secret under 16 bytes,
 *         bad options version): the message says which and what to write;
 *         PROGCACHE_EREMOTE when progcache was built without hiredis;
 *         PROGCACHE_ENOMEM.
 */
PROGCACHE_API int progcache_store_redis_new(progcache_store **out,
                                            const progcache_redis_options *opts);

/*
 * progcache_redis_counters : what a Redis store has done since it was
 * created. The caller sets version (PROGCACHE_REDIS_COUNTERS_INIT); fields
 * are only ever appended. Each get ends as exactly one of hits, misses,
 * rejected, a get error (counted in errors) or skipped_backoff.
 */
typedef struct progcache_redis_counters {
    unsigned int version; /* PROGCACHE_REDIS_COUNTERS_VERSION */

    uint64_t hits;     /* gets that returned a valid value */
    uint64_t misses;   /* gets for which Redis had no value */
    uint64_t errors;   /* calls that failed: no connection, timeout, lost
                          connection, error reply (any call, not just get) */
    uint64_t timeouts; /* the part of errors that were connect or command timeouts */
    uint64_t stores;   /* values written */
    uint64_t store_errors;    /* writes that failed (also counted in errors,
                                 except values too large to send) */
    uint64_t rejected;        /* values read that failed the envelope or HMAC
                                 check (damaged, another program's, copied
                                 from another key, forged), or were larger
                                 than max_artifact_size */
    uint64_t skipped_backoff; /* calls not attempted: the store was backing off */
    uint64_t dropped;         /* queued puts dropped: the queue was full */
    uint64_t backoffs;        /* times the store switched itself off */

    /* Version 2. */
    uint64_t newer; /* the part of misses that found a value written by a
                       newer progcache (an envelope format this one does
                       not read): not damage, not read */

    /* Version 3. */
    uint64_t too_large; /* values over max_artifact_size: puts refused
                           (also in store_errors) and gets that found one
                           (also in rejected) */
    uint64_t bad_tag;   /* the part of rejected whose HMAC tag was missing
                           or did not verify: written without the secret,
                           with another one, or forged */

    /* Version 4. */
    uint64_t over_bound; /* replies over their command's bound (size, element
                            count, nesting; docs/SECURITY.md): the
                            connection was dropped; also in errors */
    uint64_t deadlines;  /* the part of timeouts where a command's whole
                            deadline ran out (a slow or dripping server) */
} progcache_redis_counters;

#define PROGCACHE_REDIS_COUNTERS_VERSION 4
#define PROGCACHE_REDIS_COUNTERS_INIT \
    PROGCACHE__INIT(progcache_redis_counters, PROGCACHE_REDIS_COUNTERS_VERSION)

/*
 * progcache_redis_counters_get() : a snapshot of store's counters. METHOD.
 * @param out [out] version set by the caller; the fields of that version
 *            are filled.
 * @return PROGCACHE_OK; PROGCACHE_EINVAL (NULL, not a Redis store, bad
 *         version); PROGCACHE_EREMOTE (built without hiredis).
 */
PROGCACHE_API int progcache_redis_counters_get(progcache_redis_counters *out,
                                               const progcache_store *store);

/* ===========================================================================
 * Checking the tier: what `progcache remote` shows
 * ======================================================================== */

/*
 * progcache_redis_status : what progcache_redis_status_get() found. The
 * caller sets version (PROGCACHE_REDIS_STATUS_INIT).
 */
typedef struct progcache_redis_status {
    unsigned int version; /* PROGCACHE_REDIS_STATUS_VERSION */

    /* The server, as messages name it (never the password). */
    char where[512];
    /* 1 when a new connection was made, authenticated (when the URL has a
     * password) and on its database, and answered PING. */
    int reachable;
    /* When reachable is 0: why, as the log would say it ("cannot connect:
     * Connection refused", "AUTH refused: WRONGPASS ..."). */
    char error[512];
    /* PING round trips on that connection, in ms (pings of them). */
    unsigned int pings;
    double ping_median_ms;
    double ping_min_ms;
    double ping_max_ms;
    /* Authentication: auth 1 when the URL carries a password (AUTH is sent
     * on every connection; user names an ACL user, "" for the default);
     * secret 1 when values are tagged and checked with a shared secret
     * (HMAC). */
    int auth;
    char user[128];
    int secret;
    /* Under the key prefix (a SCAN, when reachable): entries, the sum of
     * their payload sizes, and the single-flight leases held now. */
    char prefix[208];
    uint64_t entries;
    uint64_t bytes;
    uint64_t leases;
    /* The server (INFO; "" or 0 where it did not say): its version, its
     * memory cap (0: none), the eviction policy, and the memory in use.
     * policy_ok is 1 for an allkeys-* policy, the one a cache needs
     * (docs/REMOTE.md, "Sizing the server"). */
    char server_version[32];
    uint64_t maxmemory;
    char maxmemory_policy[32];
    int policy_ok;
    uint64_t used_memory;
} progcache_redis_status;

#define PROGCACHE_REDIS_STATUS_VERSION 1
#define PROGCACHE_REDIS_STATUS_INIT \
    PROGCACHE__INIT(progcache_redis_status, PROGCACHE_REDIS_STATUS_VERSION)

/*
 * progcache_redis_status_get() : connect to store's server as the store
 * does (same URL, timeouts and credentials, on a connection of its own,
 * ignoring any back-off), PING it `pings` times (0: 5), and read what it
 * holds under the prefix and how it is configured. METHOD.
 * @return PROGCACHE_OK when reachable (every field filled; a part the
 *         server would not give, such as INFO under an ACL, stays empty);
 *         PROGCACHE_EREMOTE when not (out->reachable 0, out->error and the
 *         message say why); PROGCACHE_EINVAL (NULL, not a Redis store, bad
 *         version); PROGCACHE_EREMOTE "built without hiredis".
 */
PROGCACHE_API int progcache_redis_status_get(progcache_redis_status *out,
                                             progcache_store *store, unsigned int pings);

/* Called by progcache_redis_leases() for each lease: hash is the hex
 * SHA-256 of the key (the lease's Redis name ends with it), key16 the
 * first 16 hex digits of the key itself as the holder recorded it ("" for
 * a lease of an older progcache), info its holder and time left. */
typedef void (*progcache_redis_lease_fn)(void *ctx, const char *hash, const char *key16,
                                         const progcache_store_lease_info *info);

/*
 * progcache_redis_leases() : every single-flight lease held now under the
 * store's prefix (a SCAN; for tools). METHOD.
 * @return PROGCACHE_OK; PROGCACHE_EREMOTE (unreachable: message);
 *         PROGCACHE_EINVAL; PROGCACHE_ENOMEM.
 */
PROGCACHE_API int progcache_redis_leases(progcache_store *store, progcache_redis_lease_fn fn,
                                         void *ctx);

/* The Redis store also offers what any store may (progcache/store.h):
 * progcache_store_flush() waits for its put queue; progcache_store_lease_*
 * are its cross-node single-flight leases: the lease is the Redis key
 * <prefix>lease:<hex SHA-256(key)>, set with SET NX PX to a random owner
 * token; release deletes it only if the token is still the owner's and
 * publishes on the channel <prefix>done:<hex>, so waiters wake at once
 * (docs/REMOTE.md). progcache_store_counters_get() gives the five counts
 * the cache adds into its statistics; progcache_redis_counters_get() above
 * gives them all. */

#ifdef __cplusplus
}
#endif

#endif /* PROGCACHE_REMOTE_H */

/* A catch-up with other writers spread over puts (issue 32). Measuring the
 * one shard another program wrote into lists all its names: ~3,900 at a
 * million entries, 15-35 ms here, in the put that came next. Which of
 * them changed cannot be known without listing them (a cuda.core write
 * leaves no trace of its name but the shard's change time), so the put is
 * not made to wait for it: each put takes one slice of the catch-up, at
 * most progcache__file_catch_names names listed and
 * progcache__file_catch_stats stat'ed, and the next put goes on where it
 * stopped, in whichever process it runs (the progress is in the shared
 * state and in progcache/shards/next, under the lock).
 *
 * The price is the drift bound (docs/FORMAT.md, "Other writers: the drift
 * bound"): what other programs wrote is in the counters once the slices
 * of its shard are done, some puts later, not at the first put after it. */
#include <string.h>

#include "store/file/file_record.h"
#include "store/file/file_stats.h"
#include "store/file/file_store.h"

/* Per put: ~0.3 ms of listing and ~0.1-0.3 ms of stats on the 2-core
 * machine of PERFORMANCE.md with its page cache warm; a shard of ~3,900
 * names at a million entries takes some 16 puts, a shard of up to 64
 * (no record: every name stat'ed) one. */
uint64_t progcache__file_catch_names = 256;
uint64_t progcache__file_catch_stats = 64;

/* Whether this open can keep a catch-up's progress for the next put. */
static int can_slice(const file_store *fs)
{
    return fs->state_shared && !fs->network_fs && progcache__file_record_may_write(fs);
}

/* The end of a catch-up: what it found counted, and tmp/'s look when it
 * began recorded, so that a write since shows as a change. */
static void round_end(file_store *fs)
{
    file_state *st = fs->state;
    __atomic_store_n(&st->tmp_seen, st->round_tmp, __ATOMIC_RELAXED);
    __atomic_store_n(&st->round_active, 0, __ATOMIC_RELAXED);
    progcache__stats_add(fs->stats, PROGCACHE__OTHER_WRITER_RESCANS, 1);
    progcache__stats_add(fs->stats, PROGCACHE__OTHER_WRITER_BYTES, st->round_unseen);
    progcache__stats_add(fs->stats, PROGCACHE__SHARDS_RESCANNED, st->round_measured);
}

/* A shard's slices are done: its counters corrected by what the
 * measurement found against what they held when it began, unless another
 * measurement (an eviction step's, prune's, a whole catch-up's) recorded
 * the shard meanwhile: then that one stands. */
static void shard_done(file_store *fs, int shard, const file_slice_done *done)
{
    file_state *st = fs->state;
    if (__atomic_load_n(&st->shard_seen[shard], __ATOMIC_RELAXED) != done->seen_was)
        return;
    int64_t unseen = progcache__file_remeasure_shard(fs, shard, &done->sum, done->bytes_before,
                                                     done->count_before, 1);
    st->round_unseen += (uint64_t)unseen;
    __atomic_store_n(&st->shard_seen[shard], done->seen, __ATOMIC_RELAXED);
}

void progcache__file_catch_up_step(file_store *fs)
{
    if (!can_slice(fs)) {
        progcache__file_catch_up(fs, 1, 1);
        return;
    }
    file_state *st = fs->state;
    if (!__atomic_load_n(&st->round_active, __ATOMIC_RELAXED)) {
        /* tmp/'s look before any shard is looked at: a write from now on
         * shows as a change when this catch-up ends. */
        st->round_tmp = progcache__file_tmp_fingerprint(fs);
        st->round_shard = 0;
        st->round_unseen = 0;
        st->round_measured = 0;
        __atomic_store_n(&st->round_active, 1, __ATOMIC_RELAXED);
    }
    int64_t tmp_ctime = progcache__file_tmp_ctime(fs);
    uint64_t names = progcache__file_catch_names, stats = progcache__file_catch_stats;
    if (!names)
        names = 1; /* (every put makes progress) */
    if (!stats)
        stats = 1;
    while (st->round_shard < FILE_SHARDS) {
        int shard = (int)st->round_shard;
        if (!progcache__file_shard_changed(fs, shard, tmp_ctime)) {
            st->round_shard++;
            continue;
        }
        if (!names)
            return; /* the next put goes on here */
        file_slice_done done;
        int r = progcache__file_shard_slice(fs, shard, &names, &stats, &done);
        if (r == 0)
            return;
        if (r < 0) /* its progress cannot be kept: measured whole, as before slices */
            st->round_unseen += (uint64_t)progcache__file_measure_shard(fs, shard, 1);
        else
            shard_done(fs, shard, &done);
        st->round_measured++;
        st->round_shard++;
    }
    round_end(fs);
}

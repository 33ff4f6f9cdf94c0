/* Internal: the names and sizes of a cache directory's layout
 * (docs/FORMAT.md), for every file of store/file/. */
#ifndef PROGCACHE_STORE_FILE_LAYOUT_H
#define PROGCACHE_STORE_FILE_LAYOUT_H

/* entries/<2 hex>/: one shard per first byte of the entry's name. */
#define FILE_SHARDS 256
/* "entries/" + 2 + "/" + 62 + NUL */
#define FILE_REL_PATH_MAX 80
/* progcache's own files (state, lock, stats, flight, config). */
#define FILE_STATE_DIR "progcache"
/* In progcache/, the places the layers above use (progcache__place in
 * store/store_calls.h): the compile locks, the lease files of network file
 * systems, each user's PCHs. */
#define FILE_FLIGHT "flight"
#define FILE_FLIGHT_DIR "flight.d"
#define FILE_PCH_DIR_FMT "pch-%u"
/* The explain index (src/dir/dir_explain.c), which a clear empties. */
#define FILE_EXPLAIN_DIR FILE_STATE_DIR "/explain"
/* progcache's temp files: its own folder, not cuda.core's tmp/ (which
 * cuda.core counts against its cap and would sweep only after an hour). */
#define FILE_TMP_DIR FILE_STATE_DIR "/tmp"
/* An entry's name: the 64 lowercase hex digits of SHA-256(key). */
#define FILE_NAME_LEN 64

#endif

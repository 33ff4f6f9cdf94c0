#include "fs_faults.h"

#include <errno.h>

const test_fs_fault test_fs_faults[] = {
    {PROGCACHE_FS_WRITE, ENOSPC, "disk is full"},
    {PROGCACHE_FS_FSYNC, EIO, "Input/output error"},
    {PROGCACHE_FS_RENAME, EROFS, "read-only"},
    {PROGCACHE_FS_OPEN, EACCES, "ermission"},
};

const size_t test_fs_num_faults = sizeof test_fs_faults / sizeof test_fs_faults[0];

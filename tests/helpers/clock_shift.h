/* The tests' side of the clock_shift shim (clock_shift.c): step this
 * process's wall clock, and its children's, by rewriting the file the shim
 * reads. */
#ifndef PROGCACHE_TEST_CLOCK_SHIFT_H
#define PROGCACHE_TEST_CLOCK_SHIFT_H

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

/* 1 when the shim is in place (the test runs under it, from ctest). */
static inline int test_clock_shift_on(void)
{
    const char *file = getenv("PROGCACHE_TEST_CLOCK_SHIFT");
    const char *preload = getenv("LD_PRELOAD");
    return file && *file && preload && strstr(preload, "clock_shift");
}

/* From now on CLOCK_REALTIME, gettimeofday and time read seconds (signed
 * decimal) more than the machine's clock. */
static inline void test_clock_shift_set(const char *seconds)
{
    const char *file = getenv("PROGCACHE_TEST_CLOCK_SHIFT");
    CHECK(file != NULL);
    int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0 && write(fd, seconds, strlen(seconds)) == (ssize_t)strlen(seconds));
    CHECK(close(fd) == 0);
}

/* The shim steps time() and not the kernel's clock (a file's mtime):
 * otherwise a test under it would pass without testing anything. */
static inline void test_clock_shift_works(void)
{
    test_clock_shift_set("100");
    struct stat st;
    CHECK(stat(getenv("PROGCACHE_TEST_CLOCK_SHIFT"), &st) == 0);
    long ahead = (long)(time(NULL) - st.st_mtime);
    CHECK(ahead >= 99 && ahead <= 101);
    test_clock_shift_set("0");
}

#endif

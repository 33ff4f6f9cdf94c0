/* progcache-nvrtc-helper: staying warm (helper_warm.c says how and why). */
#ifndef PROGCACHE_HELPER_WARM_H
#define PROGCACHE_HELPER_WARM_H

/* Called after this process answered a compile with a PCH. Forks: the
 * caller returns at once (and exits: the library reaps it); the child
 * takes the abstract socket name, waits up to idle_ms for a connection
 * and serves each in a child of its own with serve(conn), the request's
 * PCH directory and PCH on fds 3 and 4. Never returns in the child. */
void progcache__helper_warm(const char *name, unsigned int idle_ms, int (*serve)(int conn));

#endif

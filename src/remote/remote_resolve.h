/* A host name resolved within a deadline, for any remote tier that
 * connects by itself (src/remote/remote_resolve.c; the Redis tier: hiredis
 * would block in getaddrinfo() for as long as the resolver likes). The HTTP
 * tier's libcurl resolves within its own connect timeout. */
#ifndef PROGCACHE_REMOTE_RESOLVE_H
#define PROGCACHE_REMOTE_RESOLVE_H

#include <stddef.h>

#define PROGCACHE__REMOTE_ADDRS 8
/* The numeric addresses a host name resolved to, in the resolver's order. */
typedef struct progcache__remote_addrs {
    char addr[PROGCACHE__REMOTE_ADDRS][48]; /* INET6_ADDRSTRLEN and more */
    size_t n;
} progcache__remote_addrs;

/* Resolve host (a numeric address is taken as it is) within timeout_ms.
 * 0: out filled; 1: not resolved in time (why says "could not resolve
 * within N ms"); -1: it does not resolve (why says why). */
int progcache__remote_resolve(progcache__remote_addrs *out, const char *host,
                              unsigned int timeout_ms, char *why, size_t why_size);

#endif

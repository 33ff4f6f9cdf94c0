/* A Redis host name is resolved within the connect timeout
 * (src/remote/remote_resolve.c): a DNS server that never answers ends
 * the connect at its deadline with a message naming the host, where
 * glibc's resolver alone would wait its timeout times its attempts (here
 * 30 s times 3). The resolver that never answers: in a network and mount
 * namespace of its own (unshare, as root; skipped with 77 otherwise),
 * /etc/resolv.conf names 127.0.0.1, where a UDP socket takes the queries
 * and never answers. And a name that does resolve (localhost) connects. */
#include <errno.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "redis_fixture.h"

#define CONNECT_MS 300u

/* In a child: the namespaces, the silent DNS server, the connect. Exit 0
 * (passed), 77 (cannot make the namespaces), 1 (failed). */
static int in_namespace(const char *dir)
{
    if (unshare(CLONE_NEWNS | CLONE_NEWNET) != 0) {
        fprintf(stderr, "SKIPPED: unshare(CLONE_NEWNS | CLONE_NEWNET): %s (needs root)\n",
                strerror(errno));
        return 77;
    }
    char resolv[4096], nss[4096];
    snprintf(resolv, sizeof resolv, "%s/resolv.conf", dir);
    snprintf(nss, sizeof nss, "%s/nsswitch.conf", dir);
    FILE *f = fopen(resolv, "w");
    CHECK(f && fputs("nameserver 127.0.0.1\noptions timeout:30 attempts:3\n", f) >= 0);
    fclose(f);
    CHECK((f = fopen(nss, "w")) && fputs("hosts: dns\n", f) >= 0);
    fclose(f);
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount(resolv, "/etc/resolv.conf", NULL, MS_BIND, NULL) != 0 ||
        mount(nss, "/etc/nsswitch.conf", NULL, MS_BIND, NULL) != 0) {
        fprintf(stderr, "SKIPPED: cannot bind-mount a resolv.conf: %s\n", strerror(errno));
        return 77;
    }
    /* The namespace's loopback, up. */
    int sk = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
    CHECK(sk >= 0 && ioctl(sk, SIOCGIFFLAGS, &ifr) == 0);
    ifr.ifr_flags |= IFF_UP;
    CHECK(ioctl(sk, SIOCSIFFLAGS, &ifr) == 0);
    close(sk);
    /* The DNS server that swallows every query. */
    int dns = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons(53);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(dns >= 0 && bind(dns, (struct sockaddr *)&a, sizeof a) == 0);

    log_capture log = LOG_CAPTURE_INIT;
    progcache_redis_options o = PROGCACHE_REDIS_OPTIONS_INIT;
    o.url = "redis://cache.never-answers.test:6379";
    o.connect_timeout_ms = CONNECT_MS;
    o.log = test_log_capture;
    o.log_ctx = &log;
    progcache_store *s = NULL;
    CHECK_OK(progcache_store_redis_new(&s, &o));
    progcache_buf buf = PROGCACHE_BUF_INIT;
    double t0 = test_now_ms();
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_get(&buf, s, "key", 3));
    double ms = test_now_ms() - t0;
    progcache_redis_counters c = test_redis_counters(s);
    fprintf(stderr, "  a silent DNS server: %.0f ms, %s\n", ms, log.last);
    CHECK(strstr(log.last, "host cache.never-answers.test: could not resolve within 300 ms"));
    CHECK(c.timeouts == 1);
    /* At its deadline, not glibc's 90 s: a generous bound for a loaded
     * machine, far below what the resolver alone takes. */
    CHECK(ms < 10000.0);
    progcache_buf_free(&buf);
    progcache_store_free(s);
    return 0; /* _exit: glibc's lookup thread may still be waiting */
}

int main(void)
{
    test_redis_require();
    /* A name that resolves (localhost, from /etc/hosts) is connected to. */
    test_redis server;
    test_redis_start(&server, NULL);
    char url[128];
    snprintf(url, sizeof url, "redis://localhost:%d", server.port);
    progcache_redis_options o = PROGCACHE_REDIS_OPTIONS_INIT;
    o.url = url;
    o.flags = PROGCACHE_REDIS_SYNC_PUT;
    o.connect_timeout_ms = o.command_timeout_ms = 5000;
    progcache_store *s = NULL;
    CHECK_OK(progcache_store_redis_new(&s, &o));
    CHECK_OK(progcache_store_put(s, "key", 3, "value", 5));
    progcache_buf buf = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache_store_get(&buf, s, "key", 3));
    CHECK(buf.size == 5 && memcmp(buf.data, "value", 5) == 0);
    CHECK(test_redis_counters(s).stores == 1);
    progcache_buf_free(&buf);
    progcache_store_free(s);
    test_redis_stop(&server);

    char *dir = test_mkdtemp("resolve");
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0)
        _exit(in_namespace(dir));
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    test_rmtree(dir);
    free(dir);
    CHECK(WIFEXITED(status));
    return WEXITSTATUS(status);
}

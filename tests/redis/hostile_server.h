/* A lying RESP server for the tests of docs/SECURITY.md, "A hostile
 * server": it answers every command sanely except the ones of one class,
 * which it answers in one hostile way (a mode).
 *
 * It runs in a process of its own (one more per connection), listening on
 * 127.0.0.1 on a free port, and is killed by hostile_stop, at exit, and by
 * the kernel when the test dies (PR_SET_PDEATHSIG), so it never outlives
 * the test. Its parsing of commands is the least a fixture needs; it is
 * not a Redis. */
#ifndef PROGCACHE_TEST_HOSTILE_SERVER_H
#define PROGCACHE_TEST_HOSTILE_SERVER_H

#include <sys/types.h>

typedef enum hostile_mode {
    HOSTILE_GARBAGE,    /* bytes that are not RESP */
    HOSTILE_HUGE_BULK,  /* "$9999999999" and bytes for as long as it is read */
    HOSTILE_HUGE_ARRAY, /* "*50000000" and integers for as long as it is read */
    HOSTILE_DEEP,       /* "*1" nested for as long as it is read */
    HOSTILE_DRIP,       /* a bulk string of 100000 bytes, one byte every 20 ms */
    HOSTILE_STALL,      /* reads the command, never answers */
    HOSTILE_CUT,        /* half a reply, then the connection closed */
    HOSTILE_WRONG_TYPE, /* an array of 3 integers */
    HOSTILE_ERROR,      /* an error reply */
    HOSTILE_MODES,
    /* Not a misbehaviour of the matrix: GETRANGE answered truthfully from
     * the values hostile_serve set (STRLEN too), the rest sanely. */
    HOSTILE_SERVE = HOSTILE_MODES
} hostile_mode;

typedef struct hostile_server {
    pid_t pid;
    int port;
    char url[64]; /* redis://127.0.0.1:PORT */
} hostile_server;

/* The mode's name, for messages ("huge-bulk"). */
const char *hostile_mode_name(hostile_mode mode);

/* Start a server misbehaving in mode on every command named in commands (a
 * space-separated list, upper case: "GET", "PING INFO", "EVAL SUBSCRIBE";
 * "MESSAGE": what comes on a subscription after its confirmation; "*":
 * every command). Other commands get sane answers: PING PONG, AUTH
 * and SELECT OK, GET nil, SET OK, DEL 0, SCAN an empty page, INFO a few
 * fields, SUBSCRIBE its confirmation, EVAL [0, 5000] (no entry; a lease
 * with 5 s left). CHECK-fails when it cannot start. */
void hostile_start(hostile_server *h, hostile_mode mode, const char *commands);

/* For HOSTILE_SERVE, before hostile_start: the first GETRANGE (of all
 * connections) reads from first, every later one from rest (a value
 * replaced after its first part: a tear; first == rest: one value), each
 * answered after pause_ms. The bytes are the caller's (the server's
 * process has its copy). */
void hostile_serve(const void *first, size_t first_len, const void *rest, size_t rest_len,
                   unsigned int pause_ms);
void hostile_stop(hostile_server *h);

#endif

/* Progress bars on standard error for the long subcommands (import,
 * export, verify, prune, clear, warm): drawn only on a terminal and
 * without --quiet, so logs and pipes get nothing but the results. */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tool.h"

#define WIDTH 24
#define EVERY_MS 100.0

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void tool_progress_start(tool_progress *p)
{
    memset(p, 0, sizeof *p);
    p->on = !tool_global.quiet && isatty(STDERR_FILENO);
}

/* "12", "3.4k", "1.2M": a count per second. */
static void format_rate(char out[32], size_t len, double v, int bytes)
{
    if (bytes) {
        char size[16];
        tool_format_size(size, sizeof size, (uint64_t)v);
        snprintf(out, len, "%.15sB/s", size);
    } else if (v >= 1e6) {
        snprintf(out, len, "%.1fM/s", v / 1e6);
    } else if (v >= 1e4) {
        snprintf(out, len, "%.1fk/s", v / 1e3);
    } else {
        snprintf(out, len, "%.*f/s", v < 10 ? 1 : 0, v);
    }
}

static void format_eta(char *out, size_t len, double seconds)
{
    unsigned long s = (unsigned long)(seconds + 0.5);
    if (s >= 3600)
        snprintf(out, len, "%lu:%02lu:%02lu", s / 3600, s / 60 % 60, s % 60);
    else
        snprintf(out, len, "%lu:%02lu", s / 60, s % 60);
}

static void draw(tool_progress *p, const char *note, double t)
{
    /* "checking" counts the archive's bytes; every other phase counts
     * entries or shard directories. */
    int bytes = !strcmp(p->what, "checking");
    char bar[WIDTH + 1], count[64], rate[32] = "", eta[32] = "";
    size_t filled = p->total ? (size_t)(p->done * WIDTH / p->total) : 0;
    for (size_t i = 0; i < WIDTH; i++)
        bar[i] = i < filled ? '#' : p->total ? '.' : ' ';
    bar[WIDTH] = '\0';
    if (bytes) {
        char a[24], b[24] = "?";
        tool_format_size(a, sizeof a, p->done);
        if (p->total)
            tool_format_size(b, sizeof b, p->total);
        snprintf(count, sizeof count, "%s/%s", a, b);
    } else if (p->total) {
        snprintf(count, sizeof count, "%llu/%llu", (unsigned long long)p->done,
                 (unsigned long long)p->total);
    } else {
        snprintf(count, sizeof count, "%llu", (unsigned long long)p->done);
    }
    /* A phase done within a millisecond still gets a (rough) rate. */
    double secs = (t - p->phase_start) / 1e3;
    if (secs < 0.001)
        secs = 0.001;
    if (p->done) {
        double per_s = (double)p->done / secs;
        format_rate(rate, sizeof rate, per_s, bytes);
        if (p->total && p->done < p->total) {
            char e[24];
            format_eta(e, sizeof e, (double)(p->total - p->done) / per_s);
            snprintf(eta, sizeof eta, "  ETA %s", e);
        }
    }
    fprintf(stderr, "\r[%s] %s %s%s%s%s%s%s\033[K", bar, count, p->what, rate[0] ? "  " : "",
            rate, eta, note ? "  " : "", note ? note : "");
    fflush(stderr);
    p->drawn = 1;
    p->last_draw = t;
}

void tool_progress_note(tool_progress *p, const char *what, uint64_t done, uint64_t total,
                        const char *note)
{
    if (!p->on)
        return;
    double t = now_ms();
    if (strcmp(p->what, what)) {
        /* A new phase: the last one's bar stays on its own line. */
        if (p->drawn)
            fputc('\n', stderr);
        snprintf(p->what, sizeof p->what, "%s", what);
        p->phase_start = t;
        p->drawn = 0;
        p->last_draw = 0;
    }
    p->done = done;
    p->total = total;
    if (done == total || !p->drawn || t - p->last_draw >= EVERY_MS)
        draw(p, note, t);
}

int tool_progress_cb(void *ctx, const char *what, uint64_t done, uint64_t total)
{
    tool_progress_note(ctx, what, done, total, NULL);
    return 0;
}

void tool_progress_end(tool_progress *p)
{
    if (p->on && p->drawn) {
        fputc('\n', stderr);
        fflush(stderr);
    }
    p->drawn = 0;
}

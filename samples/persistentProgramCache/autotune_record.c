/* The record --autotune keeps in the cache: which tile shape won for one
 * (device, architecture, M, N, K, epilogue).
 *
 * Key: the bytes of a fixed-format text,
 *
 *     progcache-autotune v1
 *     device=<name>
 *     arch=<sm_XY>
 *     size=<M>x<N>x<K>
 *     epilogue=<name>
 *     nvrtc=<major>.<minor>
 *     candidates=<FNV-1a 64 of every candidate's generated source, hex>
 *
 * handed to progcache_put/progcache_get like any key (the file store files
 * it under the SHA-256 of these bytes, as it does the 32-byte program
 * keys; a program key is binary and 32 bytes long, so the two never meet).
 * The NVRTC version and the digest of the candidates' sources are in the
 * key because they change the code being timed: a new compiler, a new
 * generator or another candidate list re-tunes instead of trusting an old
 * winner.
 *
 * Value: the text
 *
 *     progcache-autotune v1
 *     device=<name>
 *     arch=<sm_XY>
 *     size=<M>x<N>x<K>
 *     epilogue=<name>
 *     config=<BMxBNxBK:TMxTN>
 *     kernel_ms=<median ms of the winner>
 *
 * read strictly: every line in this order, the target repeated and
 * checked (a record for something else, or any other bytes stored under
 * the key, is a foreign record), the configuration one the generator
 * supports. Anything else is a miss that tunes again and overwrites. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample_device.h"

#define RECORD_HEADER "progcache-autotune v1"

static uint64_t fnv1a(uint64_t h, const char *s)
{
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

char *autotune_record_key(size_t *len, const autotune_target *t)
{
    const fast_config *c;
    size_t n = fast_candidates(&c);
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        char *source = kernel_source_fast(&c[i], t->epilogue);
        if (!source)
            return NULL;
        h = fnv1a(h, source);
        h = fnv1a(h, "\n--\n");
        free(source);
    }
    int major = 0, minor = 0;
    progcache_nvrtc_version(&major, &minor);
    const char *fmt = RECORD_HEADER "\ndevice=%s\narch=%s\nsize=%dx%dx%d\nepilogue=%s\n"
                                    "nvrtc=%d.%d\ncandidates=%016llx\n";
    int size = snprintf(NULL, 0, fmt, t->device, t->arch, t->m, t->n, t->k,
                        epilogue_name(t->epilogue), major, minor, (unsigned long long)h);
    char *key = malloc((size_t)size + 1);
    if (!key)
        return NULL;
    snprintf(key, (size_t)size + 1, fmt, t->device, t->arch, t->m, t->n, t->k,
             epilogue_name(t->epilogue), major, minor, (unsigned long long)h);
    *len = (size_t)size;
    return key;
}

static const char target_format[] =
    RECORD_HEADER "\ndevice=%s\narch=%s\nsize=%dx%dx%d\nepilogue=%s\n";

char *autotune_record_format(const autotune_target *t, const fast_config *best, double best_ms)
{
    char config[48];
    fast_config_format(config, sizeof config, best);
    const char *fmt = "config=%s\nkernel_ms=%.6f\n";
    int head = snprintf(NULL, 0, target_format, t->device, t->arch, t->m, t->n, t->k,
                        epilogue_name(t->epilogue));
    int tail = snprintf(NULL, 0, fmt, config, best_ms);
    char *text = malloc((size_t)head + (size_t)tail + 1);
    if (!text)
        return NULL;
    snprintf(text, (size_t)head + 1, target_format, t->device, t->arch, t->m, t->n, t->k,
             epilogue_name(t->epilogue));
    snprintf(text + head, (size_t)tail + 1, fmt, config, best_ms);
    return text;
}

/* The next line of [*p, end) as a NUL-terminated copy in line; -1 when
 * there is none, it does not end in '\n' or it is too long. */
static int next_line(char *line, size_t cap, const char **p, const char *end)
{
    const char *nl = memchr(*p, '\n', (size_t)(end - *p));
    if (!nl || (size_t)(nl - *p) >= cap)
        return -1;
    memcpy(line, *p, (size_t)(nl - *p));
    line[nl - *p] = '\0';
    *p = nl + 1;
    return 0;
}

int autotune_record_parse(fast_config *out, double *best_ms, const void *data, size_t size,
                          const autotune_target *t, char *why, size_t why_len)
{
    const char *p = data, *end = p + size;
    char expect[1024], line[512];
    int head = snprintf(expect, sizeof expect, target_format, t->device, t->arch, t->m, t->n,
                        t->k, epilogue_name(t->epilogue));
    if (size < sizeof RECORD_HEADER || memcmp(p, RECORD_HEADER "\n", sizeof RECORD_HEADER)) {
        snprintf(why, why_len, "not an autotune record");
        return -1;
    }
    if (head < 0 || (size_t)head >= sizeof expect || size < (size_t)head ||
        memcmp(p, expect, (size_t)head)) {
        snprintf(why, why_len, "a record for another device, size or epilogue");
        return -1;
    }
    p += head;
    fast_config c;
    char *num_end;
    if (next_line(line, sizeof line, &p, end) || strncmp(line, "config=", 7) ||
        fast_config_parse(&c, line + 7)) {
        snprintf(why, why_len, "malformed record (config line)");
        return -1;
    }
    const char *bad = fast_config_check(&c);
    if (bad) {
        snprintf(why, why_len, "the record names an unsupported configuration (%s)", bad);
        return -1;
    }
    if (next_line(line, sizeof line, &p, end) || strncmp(line, "kernel_ms=", 10)) {
        snprintf(why, why_len, "malformed record (kernel_ms line)");
        return -1;
    }
    double ms = strtod(line + 10, &num_end);
    if (num_end == line + 10 || *num_end || !(ms > 0 && ms < 1e9)) {
        snprintf(why, why_len, "malformed record (kernel_ms value)");
        return -1;
    }
    if (p != end) {
        snprintf(why, why_len, "malformed record (trailing bytes)");
        return -1;
    }
    *out = c;
    *best_ms = ms;
    return 0;
}

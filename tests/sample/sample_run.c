#include "sample_run.h"

#include <fcntl.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "progcache/cuda.h"

static void paths(char *out, char *err, size_t len, const char *scratch, int slot)
{
    snprintf(out, len, "%s/run%d.out", scratch, slot);
    snprintf(err, len, "%s/run%d.err", scratch, slot);
}

pid_t sample_start(const sample_run *run, const char *scratch, int slot)
{
    char out_path[4096], err_path[4096];
    paths(out_path, err_path, sizeof out_path, scratch, slot);
    const char *argv[64];
    size_t argc = 0;
    argv[argc++] = run->exe;
    for (size_t i = 0; run->args && run->args[i]; i++) {
        CHECK(argc < 63);
        argv[argc++] = run->args[i];
    }
    argv[argc] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        int o = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
            _exit(126);
        if (run->cwd && chdir(run->cwd) != 0)
            _exit(126);
        for (size_t i = 0; run->env && run->env[i]; i++)
            putenv((char *)run->env[i]);
        execv(run->exe, (char *const *)argv);
        _exit(127);
    }
    return pid;
}

void sample_finish(sample_output *out, pid_t pid, const char *scratch, int slot)
{
    memset(out, 0, sizeof *out);
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid);
    out->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    char out_path[4096], err_path[4096];
    paths(out_path, err_path, sizeof out_path, scratch, slot);
    out->out = test_read_file(out_path, &out->out_size);
    out->err = test_read_file(err_path, NULL);
    CHECK(out->out && out->err);
    char *p = out->out;
    while (*p && out->num_lines < SAMPLE_MAX_LINES) {
        out->lines[out->num_lines++] = p;
        char *nl = strchr(p, '\n');
        if (!nl)
            break;
        *nl = '\0';
        p = nl + 1;
    }
}

const char *sample_stdout_text(sample_output *out)
{
    for (size_t i = 0; i < out->out_size; i++)
        if (out->out[i] == '\0')
            out->out[i] = '\n';
    out->num_lines = 0;
    return out->out;
}

void sample_exec(sample_output *out, const sample_run *run, const char *scratch)
{
    sample_finish(out, sample_start(run, scratch, 0), scratch, 0);
}

void sample_output_free(sample_output *out)
{
    free(out->out);
    free(out->err);
    memset(out, 0, sizeof *out);
}

const char *sample_value(const sample_output *out, const char *label)
{
    size_t n = strlen(label);
    /* The value starts at column 20, or after the label and a space when
     * the label is longer ("Wait for other compile:"). */
    for (size_t i = 0; i < out->num_lines; i++)
        if (!strncmp(out->lines[i], label, n) && strlen(out->lines[i]) >= 20)
            return out->lines[i] + (n < 20 ? 20 : n + 1);
    return NULL;
}

int sample_contains(const sample_output *out, const char *text)
{
    for (size_t i = 0; i < out->num_lines; i++)
        if (strstr(out->lines[i], text))
            return 1;
    return 0;
}

int sample_match(const char *text, const char *re)
{
    regex_t r;
    char anchored[1024];
    snprintf(anchored, sizeof anchored, "^(%s)$", re);
    CHECK(regcomp(&r, anchored, REG_EXTENDED | REG_NOSUB) == 0);
    int ok = text && regexec(&r, text, 0, NULL, 0) == 0;
    regfree(&r);
    return ok;
}

void sample_dump(const sample_output *out)
{
    fprintf(stderr, "--- exit status %d; stdout:\n", out->status);
    for (size_t i = 0; i < out->num_lines; i++)
        fprintf(stderr, "%s\n", out->lines[i]);
    fprintf(stderr, "--- stderr:\n%s---\n", out->err ? out->err : "");
}

static void expect_line(const sample_output *out, size_t *i, const char *re)
{
    if (*i >= out->num_lines || !sample_match(out->lines[*i], re)) {
        sample_dump(out);
        fprintf(stderr, "line %zu does not match /%s/\n", *i + 1, re);
        CHECK(!"sample output line matches");
    }
    (*i)++;
}

static void expect_exact(const sample_output *out, size_t *i, const char *label,
                         const char *value)
{
    char want[4096];
    snprintf(want, sizeof want, "%-20s%s", label, value);
    if (*i >= out->num_lines || strcmp(out->lines[*i], want) != 0) {
        sample_dump(out);
        fprintf(stderr, "line %zu is not '%s'\n", *i + 1, want);
        CHECK(!"sample output line is exact");
    }
    (*i)++;
}

#define MS "[0-9]+\\.[0-9]{3} ms"
#define NO_DEVICE "skipped \\(no CUDA device\\)"

void sample_check_format(const sample_output *out, const sample_expect *e, char *key24)
{
    sample_check_format_ex(out, e, key24, NULL, 0);
}

void sample_check_format_ex(const sample_output *out, const sample_expect *e, char *key24,
                            const char *tile_text, size_t extra_lines)
{
    char v[512];
    size_t i = 0;
    int hit = !strcmp(e->status, "HIT");
    int miss = !strcmp(e->status, "MISS") || !strcmp(e->status, "HEALED");
    expect_line(out, &i, "Persistent Program Cache");
    expect_line(out, &i, "Device:             .+");
    expect_line(out, &i, "Compute Capability: [0-9]+\\.[0-9]+( \\(from --arch sm_[0-9]+\\))?");
    expect_exact(out, &i, "Cache directory:", e->cache_dir);
    snprintf(v, sizeof v, "C = %s(A @ B + bias)", e->epilogue);
    expect_exact(out, &i, "Workload:", v);
    snprintf(v, sizeof v, "M=%d, N=%d, K=%d", e->m, e->n, e->k);
    expect_exact(out, &i, "Matrix sizes:", v);
    if (tile_text)
        snprintf(v, sizeof v, "%s", tile_text);
    else
        snprintf(v, sizeof v, "%d", e->tile);
    expect_exact(out, &i, "Tile size:", v);
    snprintf(v, sizeof v, "warmup=%d, iterations=%d", e->warmup, e->iterations);
    expect_exact(out, &i, "Timed launches:", v);
    expect_line(out, &i, "");
    if (!strcmp(e->status, "DISABLED"))
        expect_line(out, &i, "Cache status:       DISABLED \\(.+\\)");
    else if (!strcmp(e->status, "HEALED"))
        expect_line(out, &i, "Cache status:       MISS \\(healed: .+\\)");
    else
        expect_exact(out, &i, "Cache status:", e->status);
    expect_line(out, &i, "Cache key:          [0-9a-f]{24}\\.\\.\\.");
    snprintf(key24, 25, "%.24s", out->lines[i - 1] + 20);
    expect_line(out, &i, "Artifact size:      [0-9]+\\.[0-9] KiB");
    expect_line(out, &i, "Cache lookup:       " MS);
    expect_line(out, &i, "Wait for other compile: " MS "( \\((its result was used|then compiled here)\\))?");
    expect_line(out, &i, hit ? "Compile time:       skipped" : "Compile time:       " MS);
    if (miss)
        expect_line(out, &i, "Cache store:        " MS "( \\(in the background\\))?");
    expect_line(out, &i, e->gpu ? "Module load:        " MS : "Module load:        " NO_DEVICE);
    expect_line(out, &i, "Host prep time:     " MS);
    expect_line(out, &i, e->gpu ? "Kernel time:        " MS : "Kernel time:        " NO_DEVICE);
    expect_line(out, &i, e->gpu ? "Max error:          [0-9]\\.[0-9]{6}e[-+][0-9]+"
                                : "Max error:          " NO_DEVICE);
    expect_line(out, &i, e->gpu ? "Validation:         PASSED"
                                : "Validation:         SKIPPED \\(no CUDA device present.*\\)");
    if (i + extra_lines != out->num_lines) {
        sample_dump(out);
        fprintf(stderr, "expected %zu line(s) after Validation\n", extra_lines);
        CHECK(!"no other lines after Validation");
    }
    /* Host prep is the sum of the steps, as printed. */
    double parts = 0;
    const char *labels[] = {"Cache lookup:", "Wait for other compile:", "Compile time:",
                            "Cache store:", "Module load:"};
    for (size_t l = 0; l < 5; l++) {
        const char *value = sample_value(out, labels[l]);
        if (value)
            parts += atof(value); /* "skipped" reads as 0 */
    }
    double prep = atof(sample_value(out, "Host prep time:"));
    CHECK(prep > parts - 0.0031 && prep < parts + 0.0031);
}

void sample_expect_usage_error(const char *exe, const char *scratch, const char *const *args,
                               const char *message)
{
    sample_output out;
    sample_run r = {exe, args, NULL, NULL};
    sample_exec(&out, &r, scratch);
    if (out.status != 2 || !strstr(out.err, message))
        sample_dump(&out);
    CHECK(out.status == 2);
    CHECK(out.num_lines == 0);
    CHECK(strstr(out.err, message) != NULL);
    CHECK(strchr(out.err, '\n') == out.err + strlen(out.err) - 1); /* one line */
    CHECK(!strncmp(out.err, "persistentProgramCache: ", 24));
    sample_output_free(&out);
}

int sample_setup(int argc, char **argv, const char *tag, char **exe, char **scratch)
{
    CHECK(argc == 2);
    *exe = realpath(argv[1], NULL);
    CHECK(*exe != NULL);
    *scratch = test_mkdtemp(tag);
    const progcache_cuda_api *api;
    return progcache_cuda_load(&api) == PROGCACHE_OK;
}

void sample_teardown(char *exe, char *scratch)
{
    test_rmdtemp(scratch);
    free(exe);
}

void sample_gpu_or_skip(const char *test, char *arch, size_t arch_len, char *name,
                        size_t name_len)
{
    const progcache_cuda_api *api;
    if (progcache_cuda_load(&api) != PROGCACHE_OK) {
        printf("%s: no CUDA device (%s): SKIPPED\n", test, progcache_error_last());
        exit(TEST_SKIP_CODE);
    }
    CUdevice d;
    int major = 0, minor = 0;
    CHECK(api->cuDeviceGet(&d, 0) == CUDA_SUCCESS);
    if (name)
        CHECK(api->cuDeviceGetName(name, (int)name_len, d) == CUDA_SUCCESS);
    CHECK(api->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d) ==
          CUDA_SUCCESS);
    CHECK(api->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d) ==
          CUDA_SUCCESS);
    snprintf(arch, arch_len, "sm_%d%d", major, minor);
}

void sample_expect_key_of(const char *exe, const char *scratch, const char *path,
                          const char *const *args)
{
    const char *tool = getenv("PROGCACHE_BIN");
    CHECK(tool != NULL);
    const char *key_args[] = {"key", path, "--", "-arch=sm_90", "--std=c++17", NULL};
    sample_run kr = {tool, key_args, NULL, NULL};
    sample_output key;
    sample_exec(&key, &kr, scratch);
    if (key.status != 0)
        sample_dump(&key);
    CHECK(key.status == 0 && key.num_lines >= 1);
    CHECK(sample_match(key.lines[0], "[0-9a-f]{64}"));
    sample_output out;
    sample_run r = {exe, args, NULL, NULL};
    sample_exec(&out, &r, scratch);
    if (out.status != 0)
        sample_dump(&out);
    CHECK(out.status == 0);
    const char *printed = sample_value(&out, "Cache key:");
    CHECK(printed && !strncmp(printed, key.lines[0], 24));
    sample_output_free(&out);
    sample_output_free(&key);
}

void sample_expect_usage_errors(const char *exe, const char *scratch,
                                const sample_usage_case *cases, size_t n)
{
    for (size_t i = 0; i < n; i++)
        sample_expect_usage_error(exe, scratch, cases[i].args, cases[i].message);
}

/* NVRTC: C++ source to CUBIN, PTX or LTO-IR. */
#include <stdio.h>
#include <limits.h>
#include <string.h>

#include "alloc.h"
#include "buf.h"
#include "error.h"
#include "cuda/nvrtc.h"
#include "key/key_options.h"
#include "key/nvrtc_lib.h"
#include "progcache/cuda.h"

/* How much of NVRTC's log fits in the last-error message (error.c keeps
 * 8 KiB) next to the headline and the note that it was cut. */
#define LOG_IN_MESSAGE 7000

/* NVRTC's text for r; the table is loaded whenever an nvrtcResult exists. */
static const char *nvrtc_text(nvrtcResult r)
{
    const progcache__nvrtc_api *nv = progcache__nvrtc_loaded();
    return nv ? nv->nvrtcGetErrorString(r) : "NVRTC is not loaded";
}

/* NVRTC only writes LTO-IR when asked to with -dlto. */
static int asks_for_lto(const char *const *options, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(options[i], "-dlto") || !strcmp(options[i], "--dlink-time-opt") ||
            !strcmp(options[i], "-dlink-time-opt"))
            return 1;
    return 0;
}

static int nvrtc_failed(nvrtcResult r, const char *what, const char *name)
{
    int code = r == NVRTC_ERROR_OUT_OF_MEMORY ? PROGCACHE_ENOMEM : PROGCACHE_ECOMPILE;
    return progcache__error(code, "NVRTC %s failed for program '%s': %s", what, name,
                            nvrtc_text(r));
}

/* The message for a failed compile: the headline and as much of the log as
 * fits, saying when it was cut. */
static int compile_failed(nvrtcResult r, const char *name, const char *log, size_t log_len)
{
    while (log_len && (log[log_len - 1] == '\0' || log[log_len - 1] == '\n'))
        log_len--;
    if (log_len <= LOG_IN_MESSAGE)
        return progcache__error(PROGCACHE_ECOMPILE, "NVRTC could not compile '%s' (%s):\n%.*s",
                                name, nvrtc_text(r), (int)log_len, log);
    return progcache__error(PROGCACHE_ECOMPILE,
                            "NVRTC could not compile '%s' (%s):\n%.*s\n[log cut: the first %d "
                            "of %zu bytes are shown; pass a log buffer to "
                            "progcache_nvrtc_compile, or read the result's log, for all of it]",
                            name, nvrtc_text(r), LOG_IN_MESSAGE, log, LOG_IN_MESSAGE,
                            log_len);
}

static int check_program(const progcache_key_nvrtc_options *p)
{
    if (!p->source)
        return progcache__error(PROGCACHE_EINVAL, "progcache_nvrtc_compile: source is NULL");
    if (p->target != PROGCACHE_TARGET_CUBIN && p->target != PROGCACHE_TARGET_PTX &&
        p->target != PROGCACHE_TARGET_LTOIR)
        return progcache__error(PROGCACHE_EINVAL,
                                "progcache_nvrtc_compile: target %d is not cubin, ptx or ltoir",
                                (int)p->target);
    if (p->num_options && !p->options)
        return progcache__error(PROGCACHE_EINVAL, "progcache_nvrtc_compile: options is NULL");
    for (size_t i = 0; i < p->num_options; i++)
        if (!p->options[i])
            return progcache__error(PROGCACHE_EINVAL,
                                    "progcache_nvrtc_compile: option %zu is NULL", i);
    if (p->num_name_expressions && !p->name_expressions)
        return progcache__error(PROGCACHE_EINVAL,
                                "progcache_nvrtc_compile: name_expressions is NULL");
    for (size_t i = 0; i < p->num_name_expressions; i++)
        if (!p->name_expressions[i])
            return progcache__error(PROGCACHE_EINVAL,
                                    "progcache_nvrtc_compile: name expression %zu is NULL", i);
    if (p->source_len && memchr(p->source, '\0', p->source_len))
        return progcache__error(PROGCACHE_EINVAL,
                                "progcache_nvrtc_compile: the source holds a NUL byte within "
                                "source_len; NVRTC would stop reading there");
    if (p->num_headers && !p->headers)
        return progcache__error(PROGCACHE_EINVAL, "progcache_nvrtc_compile: headers is NULL");
    for (size_t i = 0; i < p->num_headers; i++) {
        const progcache_header *h = &p->headers[i];
        if (!h->name || !h->content)
            return progcache__error(PROGCACHE_EINVAL,
                                    "progcache_nvrtc_compile: header %zu has no %s", i,
                                    h->name ? "content" : "name");
        if (h->length && memchr(h->content, '\0', h->length))
            return progcache__error(PROGCACHE_EINVAL,
                                    "progcache_nvrtc_compile: header \"%s\" holds a NUL byte "
                                    "within its length; NVRTC would stop reading there",
                                    h->name);
    }
    return PROGCACHE_OK;
}

/* Copy the program's output for its target into out. */
static int fetch_output(progcache_buf *out, nvrtcProgram prog, progcache_target target,
                        const char *name)
{
    const progcache__nvrtc_api *nv = progcache__nvrtc_loaded();
    size_t size = 0;
    nvrtcResult r;
    const char *what;
    switch (target) {
    case PROGCACHE_TARGET_PTX:
        what = "nvrtcGetPTXSize";
        r = nv->nvrtcGetPTXSize(prog, &size);
        break;
    case PROGCACHE_TARGET_LTOIR:
        what = "nvrtcGetLTOIRSize";
        r = nv->nvrtcGetLTOIRSize(prog, &size);
        break;
    default:
        what = "nvrtcGetCUBINSize";
        r = nv->nvrtcGetCUBINSize(prog, &size);
        break;
    }
    if (r != NVRTC_SUCCESS)
        return nvrtc_failed(r, what, name);
    if (size == 0)
        return progcache__error(PROGCACHE_ECOMPILE,
                                "NVRTC produced no %s for program '%s' (for a CUBIN, the options "
                                "must name a real architecture such as -arch=sm_90, not compute_90)",
                                progcache_target_name(target), name);
    int rc = progcache__buf_reserve(out, size);
    if (rc)
        return rc;
    switch (target) {
    case PROGCACHE_TARGET_PTX:
        what = "nvrtcGetPTX";
        r = nv->nvrtcGetPTX(prog, (char *)out->data);
        break;
    case PROGCACHE_TARGET_LTOIR:
        what = "nvrtcGetLTOIR";
        r = nv->nvrtcGetLTOIR(prog, (char *)out->data);
        break;
    default:
        what = "nvrtcGetCUBIN";
        r = nv->nvrtcGetCUBIN(prog, (char *)out->data);
        break;
    }
    if (r != NVRTC_SUCCESS)
        return nvrtc_failed(r, what, name);
    progcache__buf_set_size(out, size);
    return PROGCACHE_OK;
}

static int fetch_lowered(progcache_buf *names, nvrtcProgram prog,
                         const progcache_key_nvrtc_options *p, const char *name)
{
    const progcache__nvrtc_api *nv = progcache__nvrtc_loaded();
    names->size = 0;
    for (size_t i = 0; i < p->num_name_expressions; i++) {
        const char *lowered = NULL;
        nvrtcResult r = nv->nvrtcGetLoweredName(prog, p->name_expressions[i], &lowered);
        if (r != NVRTC_SUCCESS || !lowered)
            return progcache__error(PROGCACHE_ECOMPILE,
                                    "NVRTC has no lowered name for '%s' in program '%s': %s",
                                    p->name_expressions[i], name, nvrtc_text(r));
        int rc = progcache__buf_append(names, lowered, strlen(lowered) + 1);
        if (rc)
            return rc;
    }
    return progcache__buf_reserve(names, names->size);
}

static int fetch_log(progcache_buf *log, nvrtcProgram prog, const char *name)
{
    const progcache__nvrtc_api *nv = progcache__nvrtc_loaded();
    size_t size = 0;
    nvrtcResult r = nv->nvrtcGetProgramLogSize(prog, &size);
    if (r != NVRTC_SUCCESS)
        return nvrtc_failed(r, "nvrtcGetProgramLogSize", name);
    int rc = progcache__buf_reserve(log, size);
    if (rc)
        return rc;
    log->data[0] = '\0';
    if (size) {
        r = nv->nvrtcGetProgramLog(prog, (char *)log->data);
        if (r != NVRTC_SUCCESS)
            return nvrtc_failed(r, "nvrtcGetProgramLog", name);
    }
    /* NVRTC counts the NUL; the buffer's size does not. */
    progcache__buf_set_size(log, size ? strlen((const char *)log->data) : 0);
    return PROGCACHE_OK;
}

const char **progcache__nvrtc_argv(const progcache_key_nvrtc_options *program, size_t *argc)
{
    size_t n = program->num_options;
    const char **argv = progcache__calloc(n + 1, sizeof *argv);
    if (!argv) {
        progcache__error(PROGCACHE_ENOMEM, "out of memory for NVRTC options");
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        argv[i] = program->options[i];
    if (program->target == PROGCACHE_TARGET_LTOIR &&
        !asks_for_lto(program->options, program->num_options))
        argv[n++] = "-dlto";
    *argc = n;
    return argv;
}

static int compile(progcache_buf *out, progcache_buf *log, progcache_buf *lowered_names,
                   const progcache_key_nvrtc_options *program, progcache__nvrtc_pch *pch);

int progcache_nvrtc_compile(progcache_buf *out, progcache_buf *log, progcache_buf *lowered_names,
                            const progcache_key_nvrtc_options *program)
{
    if (!out || !program)
        return progcache__error(PROGCACHE_EINVAL, "progcache_nvrtc_compile: %s is NULL",
                                out ? "program" : "out");
    progcache_key_nvrtc_options loaded;
    int rc = progcache__key_options_load(&loaded, program, "progcache_nvrtc_compile");
    if (rc)
        return rc;
    return compile(out, log, lowered_names, &loaded, NULL);
}

int progcache__nvrtc_compile_pch(progcache_buf *out, progcache_buf *log, progcache_buf *lowered,
                                 const progcache_key_nvrtc_options *program,
                                 progcache__nvrtc_pch *pch)
{
    return compile(out, log, lowered, program, pch);
}

static int compile(progcache_buf *out, progcache_buf *log, progcache_buf *lowered_names,
                   const progcache_key_nvrtc_options *program, progcache__nvrtc_pch *pch)
{
    int rc = check_program(program);
    if (rc)
        return rc;

    const char *name = program->name ? program->name : "default_program";
    const progcache__nvrtc_api *nv;
    if ((rc = progcache__nvrtc_load(&nv))) {
        progcache__error_prefix("cannot compile program '%s'", name);
        return rc;
    }
    char *source_copy = NULL;
    const char **argv = NULL;
    nvrtcProgram prog = NULL;
    progcache_buf own_log = PROGCACHE_BUF_INIT;
    char **header_texts = NULL;
    const char **header_names = NULL;
    progcache_buf *logbuf = log ? log : &own_log;

    const char *source = program->source;
    if (program->source_len) {
        /* The caller gave a length: the text need not be NUL-terminated. */
        source_copy = progcache__malloc(program->source_len + 1);
        if (!source_copy) {
            rc = progcache__error(PROGCACHE_ENOMEM, "out of memory copying the source");
            goto done;
        }
        memcpy(source_copy, program->source, program->source_len);
        source_copy[program->source_len] = '\0';
        source = source_copy;
    }

    size_t argc = 0, num_pre = pch ? pch->num_pre : 0;
    const char **options = progcache__nvrtc_argv(program, &argc);
    if (options)
        argv = progcache__calloc(num_pre + argc + 1, sizeof *argv);
    if (!argv) {
        progcache__free(options);
        rc = progcache__error(PROGCACHE_ENOMEM, "out of memory for NVRTC options");
        goto done;
    }
    for (size_t i = 0; i < num_pre; i++)
        argv[i] = pch->pre[i];
    memcpy(argv + num_pre, options, argc * sizeof *argv);
    argc += num_pre;
    progcache__free(options);

    /* Headers in memory, as NVRTC wants them: NUL-terminated texts (a
     * caller's length need not end at a NUL) and their names. */
    size_t nh = program->num_headers;
    if (nh > (size_t)INT_MAX) {
        rc = progcache__error(PROGCACHE_EINVAL, "progcache_nvrtc_compile: %zu headers are more "
                                                "than NVRTC takes", nh);
        goto done;
    }
    if (nh) {
        header_texts = progcache__calloc(nh, sizeof *header_texts);
        header_names = progcache__calloc(nh, sizeof *header_names);
        if (!header_texts || !header_names) {
            rc = progcache__error(PROGCACHE_ENOMEM, "out of memory for the headers");
            goto done;
        }
        for (size_t i = 0; i < nh; i++) {
            const progcache_header *h = &program->headers[i];
            size_t len = h->length ? h->length : strlen(h->content);
            if (!(header_texts[i] = progcache__malloc(len + 1))) {
                rc = progcache__error(PROGCACHE_ENOMEM, "out of memory copying header \"%s\"",
                                      h->name);
                goto done;
            }
            memcpy(header_texts[i], h->content, len);
            header_texts[i][len] = '\0';
            header_names[i] = h->name;
        }
    }
    nvrtcResult r = nv->nvrtcCreateProgram(&prog, source, name, (int)nh,
                                       (const char *const *)header_texts, header_names);
    if (r != NVRTC_SUCCESS) {
        rc = nvrtc_failed(r, "nvrtcCreateProgram", name);
        goto done;
    }
    for (size_t i = 0; i < program->num_name_expressions; i++) {
        r = nv->nvrtcAddNameExpression(prog, program->name_expressions[i]);
        if (r != NVRTC_SUCCESS) {
            rc = progcache__error(PROGCACHE_ECOMPILE,
                                  "NVRTC rejected name expression '%s' for program '%s': %s",
                                  program->name_expressions[i], name, nvrtc_text(r));
            goto done;
        }
    }
    nvrtcResult compiled = nv->nvrtcCompileProgram(prog, (int)argc, argv);
    if (pch) {
        pch->create_status = (int)nv->nvrtcGetPCHCreateStatus(prog);
        pch->heap_required = 0;
        if (pch->create_status == NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED)
            nv->nvrtcGetPCHHeapSizeRequired(prog, &pch->heap_required);
    }
    /* The log is read either way: on success it holds the warnings. */
    rc = fetch_log(logbuf, prog, name);
    if (rc)
        goto done;
    if (compiled != NVRTC_SUCCESS) {
        if (compiled == NVRTC_ERROR_OUT_OF_MEMORY)
            rc = nvrtc_failed(compiled, "nvrtcCompileProgram", name);
        else
            rc = compile_failed(compiled, name, (const char *)logbuf->data, logbuf->size);
        goto done;
    }
    if (!pch || !pch->no_output)
        rc = fetch_output(out, prog, program->target, name);
    if (!rc && lowered_names)
        rc = fetch_lowered(lowered_names, prog, program, name);

done:
    for (size_t i = 0; header_texts && i < program->num_headers; i++)
        progcache__free(header_texts[i]);
    progcache__free(header_texts);
    progcache__free((void *)header_names);
    if (prog)
        nv->nvrtcDestroyProgram(&prog);
    progcache_buf_free(&own_log);
    progcache__free(argv);
    progcache__free(source_copy);
    return rc;
}

const char *progcache_names_at(const progcache_buf *names, size_t index)
{
    if (!names || !names->data)
        return NULL;
    size_t pos = 0;
    for (size_t i = 0; pos < names->size; i++) {
        const char *s = (const char *)names->data + pos;
        size_t len = strnlen(s, names->size - pos);
        if (i == index)
            return pos + len < names->size ? s : NULL;
        pos += len + 1;
    }
    return NULL;
}

/* What the format checkers report through: a reason, kernel names, the
 * architecture list (verdict.h). */
#include "artifact/verdict.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"

int progcache__verdict_invalid(progcache__verdict *v, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->out->reason, sizeof v->out->reason, fmt, ap);
    va_end(ap);
    v->out->valid = 0;
    return 0;
}

void progcache__verdict_name(progcache__verdict *v, const char *name, size_t len)
{
    if (!v->want_names || v->failed)
        return;
    if (progcache__buf_append(&v->out->kernels, name, len) ||
        progcache__buf_append(&v->out->kernels, "", 1)) {
        v->failed = 1;
        return;
    }
    v->out->num_kernels++;
}

void progcache__verdict_arch(progcache__verdict *v, const char *prefix, unsigned value)
{
    char one[24];
    snprintf(one, sizeof one, "%s%u", prefix, value);
    char *arch = v->out->arch;
    size_t used = strlen(arch), len = strlen(one);
    /* "sm_90,sm_90" says nothing more than "sm_90". */
    for (const char *p = arch; (p = strstr(p, one)) != NULL; p += len)
        if ((p == arch || p[-1] == ',') && (p[len] == ',' || p[len] == '\0'))
            return;
    if (used + (used ? 1 : 0) + len + 1 > sizeof v->out->arch)
        return;
    snprintf(arch + used, sizeof v->out->arch - used, "%s%s", used ? "," : "", one);
}

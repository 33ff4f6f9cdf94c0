/* The NVRTC 13 options the interceptor lets through the cache. A compile
 * with any other option runs on the real NVRTC untouched: an option this
 * list does not know may read or write files no key covers (13.5's
 * --use-bundled-headers=<dir> does), so not knowing it is a reason to
 * pass, never to guess. Options that the key cannot describe although
 * they are known (PCH, --time, -fdevice-time-trace) are refused later by
 * key/key_options.c, the one place that classifies them.
 *
 * Names match exactly up to '=' (NVRTC's long "--name" and short "-name"
 * spellings); -D, -U and -I also take their value glued on ("-DN=4"). A
 * string that does not start with '-' is the value of the option before
 * it. */
#include <string.h>

#include "intercept/intercept.h"

static const char *const names[] = {
    "gpu-architecture", "arch", "device-c", "dc", "device-w", "dw",
    "relocatable-device-code", "rdc", "extensible-whole-program", "ewp", "device-debug", "G",
    "generate-line-info", "lineinfo", "dopt", "ptxas-options", "Xptxas", "maxrregcount",
    "ftz", "prec-sqrt", "prec-div", "fmad", "use_fast_math", "extra-device-vectorization",
    "modify-stack-limit", "dlink-time-opt", "dlto", "gen-opt-lto", "optix-ir",
    "jump-table-density", "jtd", "device-stack-protector", "no-cache", "frandom-seed",
    "define-macro", "D", "undefine-macro", "U", "include-path", "I", "pre-include", "include",
    "no-source-include", "std", "builtin-move-forward", "builtin-initializer-list",
    "disable-warnings", "w", "restrict", "device-as-default-execution-space", "default-device",
    "device-int128", "optimization-info", "opt-info", "display-error-number", "err-no",
    "no-display-error-number", "no-err-no", "diag-error", "diag-suppress", "diag-warn",
    "brief-diagnostics", "brief-diag", "split-compile", "fdevice-syntax-only", "minimal",
    "Ofast-compile", "static-global-template-stub", "Werror", "Wreorder",
    "Wno-deprecated-declarations", "Wno-deprecated-gpu-targets",
    /* Known, and refused by the key's rules (key/key_options.c): listed
     * so that the counters say "options" for them as for the rest. */
    "pch", "create-pch", "use-pch", "pch-dir", "pch-verbose", "pch-messages",
    "instantiate-templates-in-pch", "time", "fdevice-time-trace",
};

static int known(const char *o)
{
    const char *name = o + 1 + (o[1] == '-');
    if ((name[0] == 'D' || name[0] == 'U' || name[0] == 'I') && o[1] != '-')
        return 1; /* -DX, -UX, -Idir */
    const char *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i]) == len && !memcmp(names[i], name, len))
            return 1;
    return 0;
}

int progcache__intercept_options_known(const char *const *options, int n, const char **bad)
{
    for (int i = 0; i < n; i++) {
        const char *o = options[i];
        if (!o || (o[0] == '-' && !known(o)) || (o[0] != '-' && (i == 0 || !options[i - 1] ||
                                                                 options[i - 1][0] != '-'))) {
            *bad = o ? o : "(NULL)";
            return 0;
        }
    }
    return 1;
}

/* The include paths and pre-includes of an NVRTC option list, as NVRTC
 * reads them, and the paths of candidate headers (include_paths.h). */
#include "headers/include_paths.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "error.h"

/* The value of an option given as "NAME=VALUE" or as NAME then VALUE in
 * the next string; NULL when option is not NAME. */
static const char *option_value(const progcache_key_nvrtc_options *o, size_t *i, const char *name)
{
    const char *s = o->options[*i];
    size_t n = strlen(name);
    if (strncmp(s, name, n))
        return NULL;
    if (s[n] == '=')
        return s + n + 1;
    if (s[n])
        return NULL;
    if (*i + 1 >= o->num_options)
        return "";
    return o->options[++*i];
}

static int add_string(const char ***list, size_t *n, const char *s)
{
    const char **p = progcache__realloc((void *)*list, (*n + 1) * sizeof *p);
    if (!p)
        return progcache__error(PROGCACHE_ENOMEM, "out of memory reading the include paths");
    p[(*n)++] = s;
    *list = p;
    return PROGCACHE_OK;
}

int progcache__include_paths_parse(progcache__include_paths *r,
                                   const progcache_key_nvrtc_options *o)
{
    memset(r, 0, sizeof *r);
    int rc = PROGCACHE_OK;
    for (size_t i = 0; i < o->num_options && !rc; i++) {
        const char *s = o->options[i], *v;
        if (!strcmp(s, "--no-source-include") || !strcmp(s, "-no-source-include")) {
            r->no_source_include = 1;
        } else if (s[0] == '-' && s[1] == 'I') {
            if (s[2])
                v = s + 2 + (s[2] == '=');
            else
                v = i + 1 < o->num_options ? o->options[++i] : "";
            while (*v == ' ' || *v == '\t')
                v++;
            rc = add_string(&r->dirs, &r->num_dirs, v);
        } else if ((v = option_value(o, &i, "--include-path"))) {
            rc = add_string(&r->dirs, &r->num_dirs, v);
        } else if ((v = option_value(o, &i, "--pre-include")) ||
                   (v = option_value(o, &i, "-include"))) {
            rc = add_string(&r->pre, &r->num_pre, v);
        } else if ((v = option_value(o, &i, "--use-bundled-headers")) ||
                   (v = option_value(o, &i, "-use-bundled-headers"))) {
            r->bundled = v;
        }
    }
    for (size_t i = 0; i < r->num_dirs && !rc; i++)
        if (!r->dirs[i][0])
            rc = progcache__error(PROGCACHE_EUNSAFEKEY,
                                  "an include path is empty: say \".\" for the working "
                                  "directory, or pass an extra digest over the headers");
    if (!rc && r->bundled && !r->bundled[0])
        rc = progcache__error(PROGCACHE_EUNSAFEKEY,
                              "--use-bundled-headers names no directory: name the one NVRTC "
                              "is to install its headers in");
    for (size_t i = 0; i < r->num_pre && !rc; i++)
        if (!r->pre[i][0])
            rc = progcache__error(PROGCACHE_EUNSAFEKEY,
                                  "a --pre-include names no file: name one, or pass an extra "
                                  "digest over the headers");
    return rc;
}

char *progcache__path_join(const char *dir, const char *name)
{
    size_t dl = strlen(dir), nl = strlen(name);
    if (!strcmp(dir, "."))
        dl = 0;
    if (dl + nl + 2 > PATH_MAX) {
        progcache__error(PROGCACHE_EUNSAFEKEY, "the path \"%s/%s\" is longer than PATH_MAX",
                         dir, name);
        return NULL;
    }
    char *p = progcache__malloc(dl + nl + 2);
    if (!p) {
        progcache__error(PROGCACHE_ENOMEM, "out of memory for a header path");
        return NULL;
    }
    memcpy(p, dir, dl);
    size_t at = dl;
    if (dl && dir[dl - 1] != '/')
        p[at++] = '/';
    memcpy(p + at, name, nl + 1);
    return p;
}

char *progcache__path_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return progcache__strdup(".");
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    char *d = progcache__malloc(n + 1);
    if (d) {
        memcpy(d, path, n);
        d[n] = '\0';
    }
    return d;
}

void progcache__include_paths_free(progcache__include_paths *p)
{
    if (!p)
        return;
    progcache__free((void *)p->dirs);
    progcache__free((void *)p->pre);
    memset(p, 0, sizeof *p);
}

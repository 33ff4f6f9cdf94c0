/* Headers in memory for `progcache key` and `progcache warm`: --header
 * NAME=FILE passes FILE's bytes to NVRTC as the header NAME (an #include
 * of exactly NAME reads them), and into the key (docs/KEY.md, "Headers in
 * memory"). One parser for both commands, so their keys agree. */
#include <stdlib.h>
#include <string.h>

#include "tool.h"

int tool_headers_add(tool_headers *h, const char *cmd, const char *what, const char *arg,
                     const char *base, uint64_t max)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || !eq[1]) {
        fprintf(stderr,
                "progcache %s: %s \"%s\": give NAME=FILE (the header's name as the source "
                "includes it, then the file holding it); to digest a file into the key "
                "instead, use --digest-file FILE\n",
                cmd, what, arg);
        return EXIT_USAGE;
    }
    size_t n = (size_t)(eq - arg);
    for (size_t i = 0; i < h->len; i++)
        if (strlen(h->items[i].name) == n && !memcmp(h->items[i].name, arg, n)) {
            fprintf(stderr, "progcache %s: %s \"%s\": a header named \"%.*s\" is given twice\n",
                    cmd, what, arg, (int)n, arg);
            return EXIT_USAGE;
        }
    const char *file = eq + 1;
    char *path = NULL;
    if (base && file[0] != '/') {
        const char *slash = strrchr(base, '/');
        size_t dir = slash ? (size_t)(slash - base) + 1 : 0;
        if ((path = malloc(dir + strlen(file) + 1))) {
            memcpy(path, base, dir);
            strcpy(path + dir, file);
        }
    } else {
        path = strdup(file);
    }
    char *name = malloc(n + 1);
    progcache_header *items = realloc(h->items, (h->len + 1) * sizeof *items);
    if (items)
        h->items = items;
    if (!path || !name || !items) {
        free(path);
        free(name);
        return tool_error(cmd, "out of memory");
    }
    memcpy(name, arg, n);
    name[n] = '\0';
    char label[4200];
    snprintf(label, sizeof label, "%s header file", what);
    unsigned char *data = NULL;
    size_t size = 0;
    int code = tool_read_input(cmd, label, path, TOOL_INPUT_REGULAR, max, &data, &size);
    free(path);
    if (code) {
        free(name);
        return code;
    }
    if (memchr(data, '\0', size)) {
        fprintf(stderr, "progcache %s: %s \"%s\": the file holds a NUL byte, which NVRTC would "
                        "stop reading at\n",
                cmd, what, arg);
        free(name);
        free(data);
        return EXIT_USAGE;
    }
    /* An empty file is a header of length 0, which the struct spells as
     * "strlen(content)": the NUL-terminated empty string says the same. */
    h->items[h->len].name = name;
    h->items[h->len].content = (const char *)data;
    h->items[h->len].length = size;
    h->len++;
    return EXIT_OK;
}

void tool_headers_free(tool_headers *h)
{
    for (size_t i = 0; i < h->len; i++) {
        free((char *)h->items[i].name);
        free((char *)h->items[i].content);
    }
    free(h->items);
    h->items = NULL;
    h->len = 0;
}

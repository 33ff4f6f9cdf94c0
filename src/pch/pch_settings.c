/* The PCH tier's settings (pch_settings.h): PROGCACHE_PCH,
 * PROGCACHE_PCH_MAX_SIZE, _MIN_MS, _HELPER, _CREATE, _WARM, and NVRTC's own
 * NVRTC_APPEND_FLAGS and NVRTC_DISABLE_PCH, read through util/config.h
 * (the one place that reads the environment) and parsed by the settings
 * table; and the environment of a helper process. */
#include "pch/pch_settings.h"

#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "config.h"
#include "error.h"
#include "settings_table.h"

static int pch_bad(progcache__pch_settings *out, const char *var, const char *value,
                   const char *want)
{
    out->mode = PROGCACHE__PCH_OFF;
    out->off_because = "a PCH setting cannot be used";
    return progcache__error(PROGCACHE_EINVAL, "%s=%s cannot be used: %s; the PCH tier is off", var,
                            value, want);
}

static int dup_var(char **out, const char *name)
{
    const char *v = progcache__config_env(name);
    *out = NULL;
    if (!v)
        return PROGCACHE_OK;
    *out = progcache__strdup(v);
    return *out ? PROGCACHE_OK : progcache__error(PROGCACHE_ENOMEM, "out of memory reading %s", name);
}

int progcache__pch_settings_read(progcache__pch_settings *out)
{
    memset(out, 0, sizeof *out);
    out->mode = PROGCACHE__PCH_ON;
    out->max_size = PROGCACHE__PCH_MAX_SIZE_DEFAULT;
    out->min_ms = PROGCACHE__PCH_MIN_MS_DEFAULT;
    out->warm_ms = PROGCACHE__PCH_WARM_MS_DEFAULT;
    int rc = dup_var(&out->helper, "PROGCACHE_PCH_HELPER");
    if (!rc)
        rc = dup_var(&out->nvrtc_append_flags, "NVRTC_APPEND_FLAGS");
    if (rc) {
        out->mode = PROGCACHE__PCH_OFF;
        out->off_because = "out of memory";
        return rc;
    }
    /* The numbers and the mode through the settings table's parser. */
    uint64_t n = 0;
    const char *v = NULL, *why = "";
    rc = progcache__config_setting(&n, &v, &why, PROGCACHE__SET_PCH_MAX_SIZE);
    if (rc == PROGCACHE_EINVAL)
        return pch_bad(out, "PROGCACHE_PCH_MAX_SIZE", v, why);
    if (rc == PROGCACHE_OK)
        out->max_size = n;
    rc = progcache__config_setting(&n, &v, &why, PROGCACHE__SET_PCH_MIN_MS);
    if (rc == PROGCACHE_EINVAL)
        return pch_bad(out, "PROGCACHE_PCH_MIN_MS", v, why);
    if (rc == PROGCACHE_OK)
        out->min_ms = (unsigned int)n; /* at most 24 hours */
    rc = progcache__config_setting(&n, &v, &why, PROGCACHE__SET_PCH_WARM);
    if (rc == PROGCACHE_EINVAL)
        return pch_bad(out, "PROGCACHE_PCH_WARM", v, why);
    if (rc == PROGCACHE_OK)
        out->warm_ms = (unsigned int)n;
    v = progcache__config_env(progcache__settings_variable(PROGCACHE__SET_PCH_CREATE));
    if (v && *v) {
        if (!strcmp(v, "inline"))
            out->create_inline = 1;
        else if (strcmp(v, "detached"))
            return pch_bad(out, "PROGCACHE_PCH_CREATE", v, "give detached (the default) or inline");
    }
    v = progcache__config_env("PROGCACHE_PCH");
    int on = 1;
    if (v && *v) {
        if (!strcmp(v, "inprocess")) {
            out->mode = PROGCACHE__PCH_INPROCESS;
        } else if (progcache__parse_bool(&on, v) != 0) {
            return pch_bad(out, "PROGCACHE_PCH", v,
                           "give on (1, the default), off (0) or inprocess");
        } else if (!on) {
            out->mode = PROGCACHE__PCH_OFF;
            out->off_because = "PROGCACHE_PCH is off";
        }
    }
    /* NVRTC itself ignores every PCH option then (and says so in each log). */
    if (progcache__config_is_set("NVRTC_DISABLE_PCH") && out->mode != PROGCACHE__PCH_OFF) {
        out->mode = PROGCACHE__PCH_OFF;
        out->off_because = "NVRTC_DISABLE_PCH is set";
    }
    return PROGCACHE_OK;
}

void progcache__pch_settings_free(progcache__pch_settings *settings)
{
    if (!settings)
        return;
    progcache__free(settings->helper);
    progcache__free(settings->nvrtc_append_flags);
    settings->helper = settings->nvrtc_append_flags = NULL;
}

static int passed_to_helper(const char *entry)
{
    return !strncmp(entry, "NVRTC_", 6) || !strncmp(entry, "LD_LIBRARY_PATH=", 16);
}

char **progcache__pch_helper_env(const char *tmpdir)
{
    size_t count = 2, bytes = strlen("TMPDIR=") + strlen(tmpdir) + 1;
    char **vars = progcache__config_environ();
    for (char **e = vars; e && *e; e++)
        if (passed_to_helper(*e)) {
            count++;
            bytes += strlen(*e) + 1;
        }
    char **env = progcache__malloc(count * sizeof *env + bytes);
    if (!env) {
        progcache__error(PROGCACHE_ENOMEM, "out of memory for a helper's environment");
        return NULL;
    }
    /* Bounded by what was counted, should the environment change between
     * the two passes (a caller's setenv on another thread). */
    char *at = (char *)(env + count), *end = at + bytes;
    size_t n = 0;
    env[n++] = at;
    at += snprintf(at, (size_t)(end - at), "TMPDIR=%s", tmpdir) + 1;
    for (char **e = vars; e && *e && n + 1 < count; e++) {
        size_t len = strlen(*e) + 1;
        if (passed_to_helper(*e) && len <= (size_t)(end - at)) {
            env[n++] = memcpy(at, *e, len);
            at += len;
        }
    }
    env[n] = NULL;
    return env;
}


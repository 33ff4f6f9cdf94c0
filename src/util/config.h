/* Internal: the settings config.c reads from the environment besides the
 * public ones (progcache_default_dir, progcache_default_remote). */
#ifndef PROGCACHE_UTIL_CONFIG_H
#define PROGCACHE_UTIL_CONFIG_H

/* $PROGCACHE_WAIT_TIMEOUT in milliseconds: the bound on waiting for
 * another compile (docs/CONFIG.md). PROGCACHE_OK; PROGCACHE_ENOTFOUND when
 * unset or empty (no message); PROGCACHE_EINVAL when it is not a duration
 * from 1 ms to 24 hours (the message names the variable and its value). */
int progcache__config_wait_timeout(unsigned int *out_ms);

#endif

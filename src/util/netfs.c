/* Which file systems are shared by several clients, and so where a
 * byte-range lock taken on one client may not exclude a process on another
 * (docs/SHARED.md, "Network file systems"). */
#include "netfs.h"

#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>

#include "config.h"
#include "error.h"

/* statfs f_type magics (linux/magic.h and the file systems' own sources;
 * not all are in the headers of every distribution). */
static const struct {
    unsigned long magic;
    const char *name;
} network_fs[] = {
    {0x6969UL, "NFS"},
    {0x65735546UL, "FUSE (sshfs, s3fs, ...)"},
    {0x0BD00BD0UL, "Lustre"},
    {0x47504653UL, "GPFS"},
    {0xFF534D42UL, "CIFS/SMB"},
    {0xFE534D42UL, "SMB2"},
    {0x517BUL, "SMB"},
    {0x01021997UL, "9p"},
    {0x564C0000UL, "VirtualBox shared folder"}, /* vboxsf */
    {0x00C36400UL, "CephFS"},
    {0x6B414653UL, "AFS"},
    {0x5346414FUL, "OpenAFS"},
    {0x73757245UL, "Coda"},
    {0x013111A8UL, "IBRIX"},
    {0x19830326UL, "BeeGFS"}, /* fhgfs */
    {0xA501FCF5UL, "WekaFS"},
};

int progcache__netfs_type(int fd, const char **name)
{
    if (name)
        *name = "local";
    struct statfs sf;
    if (fstatfs(fd, &sf) != 0)
        return 0;
    for (size_t i = 0; i < sizeof network_fs / sizeof network_fs[0]; i++)
        if ((unsigned long)sf.f_type == network_fs[i].magic) {
            if (name)
                *name = network_fs[i].name;
            return 1;
        }
    return 0;
}

const char *progcache__netfs_bad_setting(void)
{
    const char *force = progcache__config_env("PROGCACHE_FLIGHT_LOCK");
    if (!force || !*force || !strcmp(force, "lease") || !strcmp(force, "range") ||
        !strcmp(force, "auto"))
        return NULL;
    return force;
}

int progcache__netfs_kind(int fd, const char **name)
{
    const char *force = progcache__config_env("PROGCACHE_FLIGHT_LOCK");
    if (force && !strcmp(force, "lease")) {
        if (name)
            *name = "a file system where PROGCACHE_FLIGHT_LOCK=lease";
        return 1;
    }
    if (force && !strcmp(force, "range")) {
        if (name)
            *name = "a file system where PROGCACHE_FLIGHT_LOCK=range";
        return 0;
    }
    return progcache__netfs_type(fd, name);
}

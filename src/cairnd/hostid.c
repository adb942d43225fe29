/*
 * The daemon's host id: who it is to the pools it imports (multihost
 * protection, src/spa/spa_mmp.c). Two daemons that can reach the same disks
 * must never share one, so it is either given (cairnd.conf hostid, for a
 * cluster that assigns ids) or drawn at random on the first start and kept in
 * STATE_DIR/hostid, so a restarted daemon knows its own pools again. The file
 * holds 8 hex digits and a newline, like /etc/hostid's text form.
 */
#include "cairnd.h"

#include <cairn/log.h>
#include <cairn/spa.h>
#include <cairn/util.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SUB "cairnd"

static char g_hostname[64];

const char *cairnd_hostname(void) { return g_hostname; }

static uint32_t read_kept(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[32] = "";
    if (!fgets(line, sizeof line, f)) line[0] = '\0';
    fclose(f);
    line[strcspn(line, "\r\n")] = '\0';
    uint32_t id = 0;
    return mgmt_parse_hostid(line, &id) ? 0 : id;
}

/* Written to a temporary file, synced, then renamed: a crash leaves the old id or the new. */
static int write_kept(const char *path, uint32_t id)
{
    char tmp[MGMT_PATH_MAX + 16];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp) return -ENAMETOOLONG;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return -errno;
    char text[16];
    int n = snprintf(text, sizeof text, "%08x\n", id);
    int err = write(fd, text, (size_t)n) == n && fsync(fd) == 0 ? 0 : -errno;
    close(fd);
    if (!err && rename(tmp, path) < 0) err = -errno;
    if (err) unlink(tmp);
    return err;
}

int cairnd_hostid_init(const char *state_dir, uint32_t configured, char *err, size_t errlen)
{
    if (gethostname(g_hostname, sizeof g_hostname) < 0) cairn_strlcpy(g_hostname, "?", sizeof g_hostname);
    g_hostname[sizeof g_hostname - 1] = '\0';
    uint32_t id = configured;
    if (!id) {
        char path[MGMT_PATH_MAX + 8];
        snprintf(path, sizeof path, "%s/hostid", state_dir);
        id = read_kept(path);
        if (!id) {
            do id = (uint32_t)cairn_random_guid(); while (!id);
            int e = write_kept(path, id);
            if (e) {
                snprintf(err, errlen, "cannot keep the host id in %s: %s", path, strerror(-e));
                return e;
            }
            log_info(SUB, "new host id %08x kept in %s", id, path);
        }
    }
    spa_set_host(id, g_hostname);
    return 0;
}

/*
 * MOUNT protocol (RFC 1813 appendix I, version 3; version 1 for showmount's
 * EXPORT and DUMP): turns an export path, or the path of a directory below
 * one, into its file handle, after the same access check every NFS call makes
 * (the covering export's options apply). The mount list (DUMP) is advisory,
 * as in every implementation: a client that never unmounts stays listed until
 * UMNTALL or a restart.
 */
#include "nfs_srv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

enum {
    MNT3_OK = 0,
    MNT3ERR_NOENT = 2,
    MNT3ERR_ACCES = 13,
    MNT3ERR_NOTDIR = 20,
    MNT3ERR_INVAL = 22,
    MNT3ERR_NAMETOOLONG = 63,
    MNT3ERR_NOTSUPP = 10004,
    MNT3ERR_SERVERFAULT = 10006,
};

#define MNTPATHLEN 1024

static void client_name(nfs_call_t *call, char *buf, size_t len)
{
    nfs_addr_string((const struct sockaddr *)&call->peer, buf, len);
}

static void mount_add(nfs_server_t *srv, const char *host, const char *path)
{
    pthread_mutex_lock(&srv->mounts_lock);
    for (nfs_mount_entry_t *m = srv->mounts; m; m = m->next) {
        if (!strcmp(m->host, host) && !strcmp(m->path, path)) {
            pthread_mutex_unlock(&srv->mounts_lock);
            return;
        }
    }
    nfs_mount_entry_t *m = calloc(1, sizeof *m);
    if (m) {
        snprintf(m->host, sizeof m->host, "%s", host);
        snprintf(m->path, sizeof m->path, "%s", path);
        m->next = srv->mounts;
        srv->mounts = m;
    }
    pthread_mutex_unlock(&srv->mounts_lock);
}

/* Removes host's entries for path (every path when path is NULL). */
static void mount_remove(nfs_server_t *srv, const char *host, const char *path)
{
    pthread_mutex_lock(&srv->mounts_lock);
    for (nfs_mount_entry_t **pp = &srv->mounts; *pp;) {
        nfs_mount_entry_t *m = *pp;
        if (!strcmp(m->host, host) && (!path || !strcmp(m->path, path))) {
            *pp = m->next;
            free(m);
        } else {
            pp = &m->next;
        }
    }
    pthread_mutex_unlock(&srv->mounts_lock);
}

static bool get_path(nfs_call_t *call, char *path)
{
    uint32_t len;
    const uint8_t *p = nfs_xdr_get_opaque(&call->args, &len, MNTPATHLEN);
    if (call->args.err) return false;
    memcpy(path, p, len);
    path[len] = '\0';
    return strlen(path) == len;
}

static uint32_t errno_to_mnt(int e)
{
    switch (e) {
    case -ENOENT: case -ESTALE: return MNT3ERR_NOENT;
    case -EACCES: case -EPERM: return MNT3ERR_ACCES;
    case -ENOTDIR: return MNT3ERR_NOTDIR;
    case -EINVAL: return MNT3ERR_INVAL;
    case -ENAMETOOLONG: return MNT3ERR_NAMETOOLONG;
    default: return MNT3ERR_SERVERFAULT;
    }
}

/* The path made canonical in place, as the name of a place, not by following
 * anything: "." and empty components go, ".." takes back the previous component
 * (never above "/"). Whatever export then covers the result decides, with its
 * own options, so ".." cannot carry a client out of an export's rules. */
static void canonical_path(char *path)
{
    char out[MNTPATHLEN + 2];
    size_t o = 0;
    const char *p = path;
    while (*p) {
        while (*p == '/') p++;
        const char *c = p;
        while (*p && *p != '/') p++;
        size_t l = (size_t)(p - c);
        if (l == 0 || (l == 1 && c[0] == '.')) continue;
        if (l == 2 && c[0] == '.' && c[1] == '.') {
            while (o > 0 && out[o - 1] != '/') o--;
            if (o > 0) o--;
            continue;
        }
        out[o++] = '/';
        memcpy(out + o, c, l);
        o += l;
    }
    if (o == 0) out[o++] = '/';
    out[o] = '\0';
    memcpy(path, out, o + 1);
}

/* The directory at rest (components below the export's root) within the
 * export's filesystem, by lookups: symbolic links are not followed (a link
 * where a directory should be is ENOTDIR), so nothing leads outside; the
 * snapshots are reached as NFSv4 reaches them, through .cairn/snapshot/NAME. */
static int walk_dir(nfs_export_t *exp, const char *rest, zpl_node_t **out)
{
    zpl_node_t *n = NULL;
    int rc = zpl_root(nfs_export_fs(exp), &n);
    if (rc) return rc;
    const char *p = rest;
    while (*p) {
        const char *c = p;
        while (*p && *p != '/') p++;
        size_t l = (size_t)(p - c);
        if (*p) p++;
        char name[256];
        if (l >= sizeof name) {
            rc = -ENAMETOOLONG;
            break;
        }
        memcpy(name, c, l);
        name[l] = '\0';
        zpl_attr_t a;
        rc = zpl_getattr(n, &a);
        if (!rc && !S_ISDIR(a.mode)) rc = -ENOTDIR;
        zpl_node_t *next = NULL;
        if (!rc) rc = zpl_lookup(n, name, &next);
        if (rc) break;
        zpl_node_rele(n);
        n = next;
    }
    if (!rc) {
        zpl_attr_t a;
        rc = zpl_getattr(n, &a);
        if (!rc && !S_ISDIR(a.mode)) rc = -ENOTDIR;
    }
    if (rc) {
        zpl_node_rele(n);
        return rc;
    }
    *out = n;
    return 0;
}

static nfs_accept_t proc_mnt(nfs_call_t *call)
{
    char path[MNTPATHLEN + 1];
    if (!get_path(call, path)) return NFS_ACCEPT_GARBAGE_ARGS;
    nfs_xdr_t *r = call->res;
    if (call->vers == 1) {
        /* v1 handles are 32 bytes; ours are longer. */
        nfs_xdr_put_u32(r, MNT3ERR_ACCES);
        return NFS_ACCEPT_SUCCESS;
    }
    if (path[0] != '/') {
        nfs_xdr_put_u32(r, MNT3ERR_NOENT);
        return NFS_ACCEPT_SUCCESS;
    }
    canonical_path(path);
    const char *rest;
    nfs_export_t *exp = nfs_export_find_covering(call->srv, path, &rest);
    if (!exp) {
        nfs_xdr_put_u32(r, MNT3ERR_NOENT);
        return NFS_ACCEPT_SUCCESS;
    }
    zpl_cred_t eff;
    bool writable;
    nfs_call_t probe = *call;
    probe.prog = NFS_PROG_NFS;
    probe.vers = 3;
    int rc = nfs_export_authorize(exp, &probe, &eff, &writable);
    zpl_node_t *dir = NULL;
    zpl_fh_t fh;
    if (!rc) rc = walk_dir(exp, rest, &dir);
    if (!rc) rc = zpl_fh_encode(dir, &fh);
    if (dir) zpl_node_rele(dir);
    if (rc) {
        nfs_xdr_put_u32(r, errno_to_mnt(rc));
    } else {
        char host[64];
        client_name(call, host, sizeof host);
        mount_add(call->srv, host, path);
        nfs_xdr_put_u32(r, MNT3_OK);
        nfs_xdr_put_opaque(r, fh.bytes, ZPL_FH_SIZE);
        nfs_xdr_put_u32(r, 1);
        nfs_xdr_put_u32(r, NFS_AUTH_SYS);
    }
    nfs_export_rele(exp);
    return NFS_ACCEPT_SUCCESS;
}

static nfs_accept_t proc_dump(nfs_call_t *call)
{
    nfs_server_t *srv = call->srv;
    pthread_mutex_lock(&srv->mounts_lock);
    for (nfs_mount_entry_t *m = srv->mounts; m; m = m->next) {
        nfs_xdr_put_u32(call->res, 1);
        nfs_xdr_put_string(call->res, m->host);
        nfs_xdr_put_string(call->res, m->path);
    }
    pthread_mutex_unlock(&srv->mounts_lock);
    nfs_xdr_put_u32(call->res, 0);
    return NFS_ACCEPT_SUCCESS;
}

/* Group names for EXPORT: the option's client entries as written. */
static void put_groups(nfs_xdr_t *r, const char *options)
{
    bool any = false;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", options);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (strncmp(tok, "rw=", 3) && strncmp(tok, "ro=", 3)) continue;
        /* Lists are colon-separated; IPv6 entries make that ambiguous, so the
         * list goes out as one group name when it holds brackets or "::". */
        char *list = tok + 3;
        if (strchr(list, '[') || strstr(list, "::")) {
            nfs_xdr_put_u32(r, 1);
            nfs_xdr_put_string(r, list);
            any = true;
            continue;
        }
        char *s2 = NULL;
        for (char *c = strtok_r(list, ":", &s2); c; c = strtok_r(NULL, ":", &s2)) {
            nfs_xdr_put_u32(r, 1);
            nfs_xdr_put_string(r, c);
            any = true;
        }
    }
    if (!any) {
        nfs_xdr_put_u32(r, 1);
        nfs_xdr_put_string(r, "*");
    }
    nfs_xdr_put_u32(r, 0);
}

typedef struct export_arg {
    nfs_call_t *call;
} export_arg_t;

static int put_export(nfs_export_t *exp, void *arg)
{
    export_arg_t *a = arg;
    nfs_xdr_put_u32(a->call->res, 1);
    nfs_xdr_put_string(a->call->res, nfs_export_path(exp));
    char options[1024];
    nfs_export_options(exp, options, sizeof options);
    put_groups(a->call->res, options);
    return 0;
}

static nfs_accept_t proc_export(nfs_call_t *call)
{
    export_arg_t a = {call};
    nfs_export_foreach(call->srv, put_export, &a);
    nfs_xdr_put_u32(call->res, 0);
    return NFS_ACCEPT_SUCCESS;
}

nfs_accept_t nfs_mount_program(nfs_call_t *call)
{
    char host[64];
    switch (call->proc) {
    case 0: return NFS_ACCEPT_SUCCESS;
    case 1: return proc_mnt(call);
    case 2: return proc_dump(call);
    case 3: {
        char path[MNTPATHLEN + 1];
        if (!get_path(call, path)) return NFS_ACCEPT_GARBAGE_ARGS;
        client_name(call, host, sizeof host);
        size_t n = strlen(path);
        while (n > 1 && path[n - 1] == '/') path[--n] = '\0';
        mount_remove(call->srv, host, path);
        return NFS_ACCEPT_SUCCESS;
    }
    case 4:
        client_name(call, host, sizeof host);
        mount_remove(call->srv, host, NULL);
        return NFS_ACCEPT_SUCCESS;
    case 5: return proc_export(call);
    default: return NFS_ACCEPT_PROC_UNAVAIL;
    }
}

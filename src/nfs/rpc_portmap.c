/*
 * The built-in portmapper (RFC 1833): PMAP v2 and rpcbind v3/v4, answering
 * only for this server's own programs (NFS v3/v4, NLM v1/v3/v4 and NSM v1 on
 * the NFS port, MOUNT v1/v3 on the MOUNT port; itself, NLM and NSM over UDP
 * too, see rpc_udp.c, everything else over TCP only). It keeps no registrations: SET
 * and UNSET are refused, and anything else a full rpcbind offers (CALLIT, address translation) is
 * PROC_UNAVAIL. rpcbind addresses are universal addresses built from the
 * address the client reached us on, so a client connected over IPv6 gets an
 * IPv6 address back.
 */
#include "nfs_srv.h"
#include "nlm_impl.h"

#include <cairn/assert.h>

#include <arpa/inet.h>
#include <stdio.h>
#include <time.h>

enum { IPPROTO_TCP_NUM = 6, IPPROTO_UDP_NUM = 17 };

#define MAPPINGS_MAX 24

typedef struct mapping {
    uint32_t prog, vers;
    uint16_t port;
    uint32_t prot;                    /* IPPROTO_TCP_NUM or IPPROTO_UDP_NUM */
} mapping_t;

static size_t mappings(nfs_server_t *srv, mapping_t *m)
{
    size_t n = 0;
    m[n++] = (mapping_t){NFS_PROG_PORTMAP, 2, srv->port_portmap, IPPROTO_TCP_NUM};
    m[n++] = (mapping_t){NFS_PROG_PORTMAP, 3, srv->port_portmap, IPPROTO_TCP_NUM};
    m[n++] = (mapping_t){NFS_PROG_PORTMAP, 4, srv->port_portmap, IPPROTO_TCP_NUM};
    m[n++] = (mapping_t){NFS_PROG_NFS, 3, srv->port_nfs, IPPROTO_TCP_NUM};
    m[n++] = (mapping_t){NFS_PROG_NFS, 4, srv->port_nfs, IPPROTO_TCP_NUM};
    uint16_t mp = srv->port_mount ? srv->port_mount : srv->port_nfs;
    m[n++] = (mapping_t){NFS_PROG_MOUNT, 1, mp, IPPROTO_TCP_NUM};
    m[n++] = (mapping_t){NFS_PROG_MOUNT, 3, mp, IPPROTO_TCP_NUM};
    if (srv->port_pmap_udp)
        m[n++] = (mapping_t){NFS_PROG_PORTMAP, 2, srv->port_pmap_udp, IPPROTO_UDP_NUM};
    /* NLM and NSM share the NFS port, over UDP too: client hosts' sm-notify
     * sends SM_NOTIFY over UDP, and hosts that mount with proto=udp (or older
     * lockd setups) take their locks over UDP. */
    if (srv->nlm_state) {
        static const uint32_t nlm_versions[] = {1, 3, 4};
        for (size_t i = 0; i < sizeof nlm_versions / sizeof nlm_versions[0]; i++) {
            m[n++] = (mapping_t){NFS_PROG_NLM, nlm_versions[i], srv->port_nfs, IPPROTO_TCP_NUM};
            if (srv->port_nfs_udp)
                m[n++] = (mapping_t){NFS_PROG_NLM, nlm_versions[i], srv->port_nfs_udp,
                                     IPPROTO_UDP_NUM};
        }
        m[n++] = (mapping_t){NFS_PROG_NSM, 1, srv->port_nfs, IPPROTO_TCP_NUM};
        if (srv->port_nfs_udp)
            m[n++] = (mapping_t){NFS_PROG_NSM, 1, srv->port_nfs_udp, IPPROTO_UDP_NUM};
    }
    CAIRN_VERIFY(n <= MAPPINGS_MAX);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (m[i].port) m[k++] = m[i];
    return k;
}

static uint16_t lookup_port(nfs_server_t *srv, uint32_t prog, uint32_t vers, uint32_t prot)
{
    mapping_t m[MAPPINGS_MAX];
    size_t n = mappings(srv, m);
    for (size_t i = 0; i < n; i++)
        if (m[i].prog == prog && m[i].vers == vers && m[i].prot == prot) return m[i].port;
    return 0;
}

/* The local address of the call's connection (where the client reached us). */
static void local_addr(nfs_call_t *call, char *buf, size_t len, bool *v6)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    buf[0] = '\0';
    *v6 = false;
    if (nfs_conn_local(call->conn, &ss, &sl) < 0) return;
    if (ss.ss_family == AF_INET6 &&
        !IN6_IS_ADDR_V4MAPPED(&((struct sockaddr_in6 *)&ss)->sin6_addr))
        *v6 = true;
    nfs_addr_string((struct sockaddr *)&ss, buf, len);
}

static void put_uaddr(nfs_call_t *call, uint16_t port)
{
    if (!port) {
        nfs_xdr_put_string(call->res, "");
        return;
    }
    char a[64], u[96];
    bool v6;
    local_addr(call, a, sizeof a, &v6);
    snprintf(u, sizeof u, "%s.%u.%u", a, port >> 8, port & 0xff);
    nfs_xdr_put_string(call->res, u);
}

static nfs_accept_t pmap_v2(nfs_call_t *call)
{
    nfs_xdr_t *a = &call->args, *r = call->res;
    switch (call->proc) {
    case 0: return NFS_ACCEPT_SUCCESS;
    case 1: /* SET */
    case 2: /* UNSET */
        for (int i = 0; i < 4; i++) nfs_xdr_get_u32(a);
        if (a->err) return NFS_ACCEPT_GARBAGE_ARGS;
        nfs_xdr_put_u32(r, 0);
        return NFS_ACCEPT_SUCCESS;
    case 3: { /* GETPORT */
        uint32_t prog = nfs_xdr_get_u32(a), vers = nfs_xdr_get_u32(a);
        uint32_t prot = nfs_xdr_get_u32(a);
        nfs_xdr_get_u32(a);
        if (a->err) return NFS_ACCEPT_GARBAGE_ARGS;
        nfs_xdr_put_u32(r, lookup_port(call->srv, prog, vers, prot));
        return NFS_ACCEPT_SUCCESS;
    }
    case 4: { /* DUMP */
        mapping_t m[MAPPINGS_MAX];
        size_t n = mappings(call->srv, m);
        for (size_t i = 0; i < n; i++) {
            nfs_xdr_put_u32(r, 1);
            nfs_xdr_put_u32(r, m[i].prog);
            nfs_xdr_put_u32(r, m[i].vers);
            nfs_xdr_put_u32(r, m[i].prot);
            nfs_xdr_put_u32(r, m[i].port);
        }
        nfs_xdr_put_u32(r, 0);
        return NFS_ACCEPT_SUCCESS;
    }
    default: return NFS_ACCEPT_PROC_UNAVAIL;
    }
}

static nfs_accept_t rpcb_v34(nfs_call_t *call)
{
    nfs_xdr_t *a = &call->args, *r = call->res;
    switch (call->proc) {
    case 0: return NFS_ACCEPT_SUCCESS;
    case 1: /* SET */
    case 2: /* UNSET */
    case 3: /* GETADDR */
    case 9: { /* GETVERSADDR (v4) */
        if (call->proc == 9 && call->vers != 4) return NFS_ACCEPT_PROC_UNAVAIL;
        uint32_t prog = nfs_xdr_get_u32(a), vers = nfs_xdr_get_u32(a), len;
        const uint8_t *netid = nfs_xdr_get_opaque(a, &len, 64);
        char nid[65] = "";
        if (netid) memcpy(nid, netid, len), nid[len] = '\0';
        nfs_xdr_get_opaque(a, &len, 256); /* addr */
        nfs_xdr_get_opaque(a, &len, 256); /* owner */
        if (a->err) return NFS_ACCEPT_GARBAGE_ARGS;
        if (call->proc <= 2) {
            nfs_xdr_put_u32(r, 0);
            return NFS_ACCEPT_SUCCESS;
        }
        bool tcp = !strcmp(nid, "tcp") || !strcmp(nid, "tcp6") || nid[0] == '\0';
        bool udp = !strcmp(nid, "udp") || !strcmp(nid, "udp6");
        put_uaddr(call, tcp   ? lookup_port(call->srv, prog, vers, IPPROTO_TCP_NUM)
                        : udp ? lookup_port(call->srv, prog, vers, IPPROTO_UDP_NUM) : 0);
        return NFS_ACCEPT_SUCCESS;
    }
    case 4: { /* DUMP */
        mapping_t m[MAPPINGS_MAX];
        size_t n = mappings(call->srv, m);
        char a6[64];
        bool v6;
        local_addr(call, a6, sizeof a6, &v6);
        for (size_t i = 0; i < n; i++) {
            nfs_xdr_put_u32(r, 1);
            nfs_xdr_put_u32(r, m[i].prog);
            nfs_xdr_put_u32(r, m[i].vers);
            bool udp = m[i].prot == IPPROTO_UDP_NUM;
            nfs_xdr_put_string(r, udp ? (v6 ? "udp6" : "udp") : (v6 ? "tcp6" : "tcp"));
            put_uaddr(call, m[i].port);
            nfs_xdr_put_string(r, "cairnd");
        }
        nfs_xdr_put_u32(r, 0);
        return NFS_ACCEPT_SUCCESS;
    }
    case 6: /* GETTIME */
        nfs_xdr_put_u32(r, (uint32_t)time(NULL));
        return NFS_ACCEPT_SUCCESS;
    default: return NFS_ACCEPT_PROC_UNAVAIL;
    }
}

nfs_accept_t nfs_portmap_program(nfs_call_t *call)
{
    return call->vers == 2 ? pmap_v2(call) : rpcb_v34(call);
}

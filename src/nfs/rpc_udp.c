/*
 * The portmapper, NSM and NLM over UDP. NFS and MOUNT are served over TCP
 * only, but a Linux client host that restarts announces it with sm-notify,
 * which asks the server's portmapper for NSM over UDP and sends SM_NOTIFY over
 * UDP (without this the server would never hear of it and the host's old NLM
 * locks would be held for good), and a host whose lockd talks UDP (a mount
 * with proto=udp, older clients) takes its locks there. One thread reads UDP
 * sockets on the portmapper's and the NFS port (same addresses as the TCP
 * listeners) and answers PMAP/rpcbind, NSM and NLM calls in place (an NLM
 * call holds the state lock briefly and never waits for a client: blocked
 * locks are answered BLOCKED and granted later by a callback); any other
 * program gets PROG_UNAVAIL, so a client probing for NFS over UDP fails at
 * once. NLM over UDP has no duplicate request cache: its calls are idempotent
 * for one owner (a retransmitted LOCK finds the lock already its own, an
 * UNLOCK of nothing is granted), as lockd's are. The destination address of each
 * datagram (IP_PKTINFO) is where rpcbind's universal addresses point and
 * where the reply comes from.
 */
#include "nfs_srv.h"
#include "nlm_impl.h"

#include <cairn/log.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/uio.h>
#include <unistd.h>

#define SUB "nfs"
#define UDP_MAX 9000u

static int udp_bind(const char *host_in, uint16_t port)
{
    const char *host = host_in && host_in[0] && strcmp(host_in, "0.0.0.0") ? host_in : NULL;
    struct addrinfo hints = {.ai_socktype = SOCK_DGRAM, .ai_flags = AI_PASSIVE | AI_NUMERICHOST};
    hints.ai_family = host ? AF_UNSPEC : AF_INET6;
    char p[8];
    snprintf(p, sizeof p, "%u", port);
    struct addrinfo *ai;
    int rc = getaddrinfo(host, p, &hints, &ai);
    if (rc != 0 && !host) {
        hints.ai_family = AF_INET;
        rc = getaddrinfo(host, p, &hints, &ai);
    }
    if (rc != 0) return -EINVAL;
    int fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
        int one = 1, zero = 0;
        if (ai->ai_family == AF_INET6) {
            if (!host) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
            setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof one);
        }
        setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
            rc = -errno;
            close(fd);
            fd = rc;
        }
    } else {
        fd = -errno;
    }
    freeaddrinfo(ai);
    return fd;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void serve_one(nfs_server_t *srv, int fd, uint16_t port)
{
    uint8_t buf[UDP_MAX];
    struct sockaddr_storage peer;
    union {
        struct cmsghdr align;
        uint8_t b[256];
    } ctl;
    struct iovec iov = {buf, sizeof buf};
    struct msghdr mh = {.msg_name = &peer, .msg_namelen = sizeof peer, .msg_iov = &iov,
                        .msg_iovlen = 1, .msg_control = ctl.b, .msg_controllen = sizeof ctl.b};
    ssize_t n = recvmsg(fd, &mh, 0);
    if (n < 24) return;
    /* Where it was sent: rpcbind answers with that address, the reply leaves from it. */
    struct sockaddr_storage local = {0};
    socklen_t llen = 0;
    /* Aligned for the struct cmsghdr written into it, as ctl above. */
    union {
        uint8_t b[64];
        struct cmsghdr align;
    } reply_ctl = {{0}};
    size_t reply_ctl_len = 0;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
        if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_PKTINFO) {
            struct in_pktinfo pi;
            memcpy(&pi, CMSG_DATA(cm), sizeof pi);
            struct sockaddr_in *s = (struct sockaddr_in *)&local;
            s->sin_family = AF_INET;
            s->sin_addr = pi.ipi_addr;
            s->sin_port = htons(port);
            llen = sizeof *s;
            struct cmsghdr *out = (struct cmsghdr *)reply_ctl.b;
            out->cmsg_level = IPPROTO_IP;
            out->cmsg_type = IP_PKTINFO;
            out->cmsg_len = CMSG_LEN(sizeof pi);
            struct in_pktinfo po = {.ipi_spec_dst = pi.ipi_addr};
            memcpy(CMSG_DATA(out), &po, sizeof po);
            reply_ctl_len = CMSG_SPACE(sizeof po);
        } else if (cm->cmsg_level == IPPROTO_IPV6 && cm->cmsg_type == IPV6_PKTINFO) {
            struct in6_pktinfo pi;
            memcpy(&pi, CMSG_DATA(cm), sizeof pi);
            struct sockaddr_in6 *s = (struct sockaddr_in6 *)&local;
            s->sin6_family = AF_INET6;
            s->sin6_addr = pi.ipi6_addr;
            s->sin6_port = htons(port);
            llen = sizeof *s;
            struct cmsghdr *out = (struct cmsghdr *)reply_ctl.b;
            out->cmsg_level = IPPROTO_IPV6;
            out->cmsg_type = IPV6_PKTINFO;
            out->cmsg_len = CMSG_LEN(sizeof pi);
            struct in6_pktinfo po = {.ipi6_addr = pi.ipi6_addr};
            memcpy(CMSG_DATA(out), &po, sizeof po);
            reply_ctl_len = CMSG_SPACE(sizeof po);
        }
    }
    uint32_t prog = be32(buf + 12);
    if (be32(buf + 4) != 0) return;   /* not a call */
    uint8_t hdr[NFS_RPC_HDR_MAX];
    size_t hlen = 0;
    nfs_xdr_t res = {0};
    int rc;
    if (prog == NFS_PROG_PORTMAP || prog == NFS_PROG_NSM || prog == NFS_PROG_NLM) {
        nfs_conn_t *c = nfs_conn_detached(srv, (struct sockaddr *)&peer, mh.msg_namelen);
        if (!c) return;
        if (llen) nfs_conn_set_local(c, (struct sockaddr *)&local, llen);
        rc = nfs_rpc_execute(c, buf, (size_t)n, hdr, &hlen, &res);
        nfs_conn_detached_free(c);
    } else {
        /* Only TCP serves the rest: say so at once rather than let it time out. */
        uint32_t w[6] = {be32(buf), 1, 0, 0, 0, 1};
        for (int i = 0; i < 6; i++)
            hdr[4 + 4 * i] = (uint8_t)(w[i] >> 24), hdr[5 + 4 * i] = (uint8_t)(w[i] >> 16),
            hdr[6 + 4 * i] = (uint8_t)(w[i] >> 8), hdr[7 + 4 * i] = (uint8_t)w[i];
        hlen = 28;
        nfs_xdr_init_encode(&res, 0);
        rc = 1;
    }
    if (rc == 1) {
        nfs_xdr_flatten(&res);
        struct iovec out[2] = {{hdr + 4, hlen - 4}, {res.buf, res.len}};
        struct msghdr om = {.msg_name = &peer, .msg_namelen = mh.msg_namelen, .msg_iov = out,
                            .msg_iovlen = res.len ? 2 : 1,
                            .msg_control = reply_ctl_len ? reply_ctl.b : NULL,
                            .msg_controllen = reply_ctl_len};
        if (sendmsg(fd, &om, MSG_DONTWAIT) < 0)
            log_debug(SUB, "UDP reply not sent: %s", strerror(errno));
    }
    nfs_xdr_free(&res);
}

static void *udp_loop(void *arg)
{
    nfs_server_t *srv = arg;
    while (!atomic_load(&srv->stopping)) {
        struct pollfd p[2];
        int k = 0;
        for (int i = 0; i < srv->nudp; i++) p[k++] = (struct pollfd){.fd = srv->udp_fd[i], .events = POLLIN};
        int n = poll(p, (nfds_t)k, 500);
        if (n <= 0) continue;
        for (int i = 0; i < k; i++)
            if (p[i].revents & POLLIN) serve_one(srv, p[i].fd, srv->udp_port[i]);
    }
    return NULL;
}

void nfs_udp_start(nfs_server_t *srv)
{
    srv->nudp = 0;
    const nfs_listen_addr_t *la[2] = {&srv->cfg.portmap, &srv->cfg.nfs};
    uint16_t ports[2] = {srv->port_portmap, srv->port_nfs};
    for (int i = 0; i < 2; i++) {
        if (!ports[i]) continue;
        int fd = udp_bind(la[i]->host, ports[i]);
        if (fd < 0) {
            log_info(SUB, "no UDP on port %u (%s): NSM notifications and NLM over UDP "
                     "will not arrive", ports[i], strerror(-fd));
            continue;
        }
        srv->udp_fd[srv->nudp] = fd;
        srv->udp_port[srv->nudp++] = ports[i];
        if (i == 0) srv->port_pmap_udp = ports[i];
        if (i == 1) srv->port_nfs_udp = ports[i];
    }
    if (srv->nudp && pthread_create(&srv->udp_thread, NULL, udp_loop, srv) == 0)
        srv->udp_started = true;
}

void nfs_udp_stop(nfs_server_t *srv)
{
    if (srv->udp_started) pthread_join(srv->udp_thread, NULL);
    srv->udp_started = false;
    for (int i = 0; i < srv->nudp; i++) close(srv->udp_fd[i]);
    srv->nudp = 0;
}

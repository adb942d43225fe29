/*
 * The defaults of the front ends' tunables: what the NFS server and the iSCSI
 * target apply when a knob is 0, and what the daemon's configuration
 * (src/mgmt/mgmt_config.c) starts from and shows. Constants only, so that the
 * configuration, which sits below the front ends' libraries, needs none of
 * their headers.
 */
#ifndef CAIRN_FRONTEND_DEFAULTS_H
#define CAIRN_FRONTEND_DEFAULTS_H

#define NFS_DEFAULT_MAX_CONNS 4096u
#define NFS_DEFAULT_MAX_CONNS_PER_CLIENT 256u
#define NFS_DEFAULT_IDLE_TIMEOUT_S 360u   /* six minutes, as Linux's knfsd */
#define NFS_DEFAULT_LEASE_S 90u           /* NFSv4 lease, as Linux's knfsd */

#define ISCSI_DEFAULT_MAX_CONNS 1024u
#define ISCSI_DEFAULT_MAX_CONNS_PER_CLIENT 64u
#define ISCSI_DEFAULT_LOGIN_TIMEOUT_S 15u

#endif

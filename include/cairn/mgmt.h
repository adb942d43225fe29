/*
 * Management layer (src/mgmt/): what the `cairn` CLI and the `cairnd` daemon
 * share, apart from the engine itself.
 *
 *  - Defaults (state dir, socket, listen ports) kept in one place; conf/cairnd.conf
 *    repeats them for administrators.
 *  - Framing of protobuf messages (src/mgmt/cairn_mgmt.proto) on the admin socket:
 *    4-byte little-endian length + payload, MGMT_FRAME_MAX at most.
 *  - The daemon's configuration file parser (`key = value`, `#` comments).
 *  - The zpool-style vdev grammar parser (path | mirror DEV... | raidzP DEV...).
 *  - Output helpers: tables printed aligned, tab-separated (-H) or as JSON.
 *
 * Everything here is pure logic over buffers, strings and file descriptors, so
 * it is unit-tested without a pool engine.
 */
#ifndef CAIRN_MGMT_H
#define CAIRN_MGMT_H

#include <cairn/dsl_types.h>
#include <cairn/types.h>
#include <stdio.h>

/* The vdev grammar builds the pool's own description of a vdev tree (spa.h);
 * only a pointer to it crosses this interface. */
typedef struct spa_vdev_spec spa_vdev_spec_t;

/* ---- defaults (conf/cairnd.conf says the same) ---- */
#define CAIRN_DEFAULT_STATE_DIR "/var/lib/cairn"
#define CAIRN_DEFAULT_CONFIG "/etc/cairn/cairnd.conf"
#define CAIRN_DEFAULT_SOCKET CAIRN_DEFAULT_STATE_DIR "/cairnd.sock"
#define CAIRN_SOCKET_ENV "CAIRN_SOCKET"
#define CAIRN_DEFAULT_NFS_LISTEN "0.0.0.0:2049"
#define CAIRN_DEFAULT_MOUNT_LISTEN "0.0.0.0:20048"
#define CAIRN_DEFAULT_PORTMAP_LISTEN "0.0.0.0:111"
#define CAIRN_DEFAULT_ISCSI_LISTEN "0.0.0.0:3260"
#define CAIRN_DEFAULT_HTTP_PORT 8443   /* http_listen: off unless set */
#define CAIRN_DEFAULT_TXG_TIMEOUT 5
#define CAIRN_VERSION "0.1.0"

/* ---- framing ---- */
#define MGMT_FRAME_MAX (16u * 1024 * 1024)
#define MGMT_FRAME_HDR 4

/* Writes the 4-byte little-endian header for a payload of len bytes. */
void mgmt_frame_header(uint32_t len, uint8_t hdr[MGMT_FRAME_HDR]);
/* Looks at the first avail bytes of a stream: 0 and *payload_len when a whole frame
 * (header + payload) is present, -EAGAIN when more bytes are needed, -EMSGSIZE when
 * the header announces more than MGMT_FRAME_MAX. */
int mgmt_frame_parse(const uint8_t *buf, size_t avail, uint32_t *payload_len);
/* Sends one frame (retrying short writes, no SIGPIPE). */
int mgmt_frame_send(int fd, const void *payload, size_t len);
/* Receives one frame into a malloc'd *payload (caller frees). Returns 0, -ENOTCONN
 * on a clean end of stream before a header, -EPROTO when the stream ends inside a
 * frame, -EMSGSIZE for an oversized frame (nothing more is read), or -errno. */
int mgmt_frame_recv(int fd, uint8_t **payload, size_t *len);

/* ---- daemon configuration ---- */
#define MGMT_PATH_MAX 4096
#define MGMT_ADDR_MAX 256

typedef struct mgmt_listen {
    char host[MGMT_ADDR_MAX];   /* numeric address or host name; "[::]" stored as "::" */
    uint16_t port;
} mgmt_listen_t;

typedef struct cairnd_config {
    char state_dir[MGMT_PATH_MAX];
    char socket[MGMT_PATH_MAX];     /* "" until resolved: state_dir/cairnd.sock */
    mgmt_listen_t nfs, mount, portmap, iscsi;
    int log_level;                  /* cairn_log_level_t */
    bool log_syslog;                /* copy the log to syslog(3) as well */
    char log_file[MGMT_PATH_MAX];   /* "" or a file the log is appended to as well */
    uint32_t txg_timeout;           /* seconds */
    uint64_t arc_max;               /* bytes of the ARC (all pools); 0: half the memory */
    /* Connection caps of the front ends (include/cairn/connlimit.h). */
    uint32_t nfs_max_conns, nfs_max_conns_per_client;
    uint32_t nfs_idle_timeout;      /* seconds without a request before a close */
    uint32_t nfs_lease_time;        /* NFSv4 lease, seconds */
    uint32_t nfs_delegations;       /* 1: NFSv4 read/write delegations, 0 (default): none */
    uint32_t nfs_grace_time;        /* seconds of grace after a restart (v4 and NLM); 0: lease */
    uint32_t nlm_client_portmap;    /* port of client hosts' portmappers (NLM callbacks); 0: 111 */
    uint32_t iscsi_max_conns, iscsi_max_conns_per_client;
    uint32_t iscsi_login_timeout;   /* seconds a connection has to complete its login */
    uint32_t alua_tpg_id;           /* this head's ALUA target port group (1..65535) */
    uint32_t alua_partner_tpg_id;   /* the HA partner's group; 0: no partner */
    /* Fault management: a device with more than fault_errors I/O or checksum
     * errors within fault_window seconds is FAULTED (spa_fault_set_policy). */
    uint32_t fault_errors, fault_window;
    uint32_t vdev_probe_interval_ms; /* missing disks looked for; 0: never */
    /* How a scan yields to client I/O (spa_scan_throttle_t): the window, and the
     * pause before each block a resilver / scrub issues while clients are busy. */
    uint32_t scan_idle_ms, resilver_delay_ms, scrub_delay_ms;
    /* The background defragmenter runs once a pool saw no client I/O this long
     * (dsl_set_defrag_idle_ms); 0: never. */
    uint32_t defrag_idle_ms;
    /* Buffer pool chunks in transparent huge pages (cairn_bufpool_set_huge_pages). */
    uint32_t buffer_huge_pages;
    /* HTTPS (REST API and /metrics): off while http_listen is unset (port 0). Empty
     * cert/key paths: a self-signed pair made in the state dir on first start. */
    mgmt_listen_t http;
    char http_cert[MGMT_PATH_MAX], http_key[MGMT_PATH_MAX];
    bool http_metrics_public;       /* /metrics without a token */
    /* Multihost protection (spa_mmp.c): the host id (0: the one kept in the state
     * dir), the heartbeat interval and how many may fail before a suspension;
     * device_lock off lets daemons of one machine share devices (tests). */
    uint32_t hostid;
    uint32_t mmp_interval_ms, mmp_fail_intervals;
    bool device_lock;
    /* Analytics (include/cairn/analytics.h): 0 turns every statistic off at
     * start (cairn analytics enable turns one on); hourly samples kept. */
    uint32_t analytics;
    uint32_t analytics_retention_days;
} cairnd_config_t;

/* A host id: 1 to 8 hex digits (an optional 0x), not zero. 0 or -EINVAL. */
int mgmt_parse_hostid(const char *s, uint32_t *out);

void mgmt_config_defaults(cairnd_config_t *cfg);
/* Parses "ADDR:PORT", "[V6ADDR]:PORT" or ":PORT"/"PORT" (any address). */
int mgmt_parse_listen(const char *s, mgmt_listen_t *out);
/* Applies one line (comments and blank lines are fine). On error fills err with a
 * message without location and returns -EINVAL. */
int mgmt_config_apply_line(cairnd_config_t *cfg, const char *line, char *err, size_t errlen);
/* Applies key = value. */
int mgmt_config_set(cairnd_config_t *cfg, const char *key, const char *value, char *err,
                    size_t errlen);
/* Reads a whole file; errors are "FILE:LINE: message". */
int mgmt_config_load(cairnd_config_t *cfg, const char *path, char *err, size_t errlen);
/* Checks what no single setting can: a per-client connection cap above its
 * server's cap. 0 or -EINVAL with err naming both settings. */
int mgmt_config_check(const cairnd_config_t *cfg, char *err, size_t errlen);
/* Takes the `cache DEV...` section out of a `pool create` word list: argv keeps the
 * other words (*argc shrinks), *cache gets the devices (malloc'd array of pointers
 * into argv). -EINVAL with err for a `cache` without devices. */
int mgmt_cache_section_split(int *argc, char **argv, char ***cache, size_t *ncache, char *err,
                             size_t errlen);
/* The same for any section of plain devices: keyword "cache" or "spare". */
int mgmt_section_split(const char *keyword, int *argc, char **argv, char ***devs, size_t *ndevs,
                       char *err, size_t errlen);
/* Formats a listen address back into "host:port" ("[v6]:port"). */
void mgmt_listen_format(const mgmt_listen_t *l, char *buf, size_t len);

/* ---- vdev grammar ---- */
/* Parses the VDEV... words of `pool create` into a ROOT spec. Leaf paths are kept as
 * given (the CLI resolves them first). Rejects: no vdevs, an unknown vdev type (a word
 * without '/' that is neither a keyword nor an existing file), a mirror with fewer than
 * 2 devices, raidzP with fewer than P+2, the sections log/cache/spare (not supported
 * yet), and a path given twice. Free with mgmt_vdev_spec_free(). */
int mgmt_vdev_spec_parse(int argc, char *const argv[], spa_vdev_spec_t **root, char *err,
                         size_t errlen);
void mgmt_vdev_spec_free(spa_vdev_spec_t *root);
/* Number of leaves under spec and a flat list of their paths (not copies). */
size_t mgmt_vdev_spec_leaves(const spa_vdev_spec_t *spec, const char **paths, size_t cap);

/* Pool names: start with a letter, then letters, digits, "_-.:"; not a vdev keyword. */
int mgmt_pool_name_check(const char *name, char *err, size_t errlen);

/* ---- datasets (the zfs grammar) ---- */
/* What a command accepts as a name: a dataset ("tank", "tank/a/b"), a snapshot
 * ("tank/a@monday"), or either. */
#define MGMT_DSNAME_DATASET 1u
#define MGMT_DSNAME_SNAPSHOT 2u
#define MGMT_DSNAME_ANY (MGMT_DSNAME_DATASET | MGMT_DSNAME_SNAPSHOT)
/* Checks a dataset or snapshot name: the first component is a valid pool name, every
 * component is non-empty and made of letters, digits and "_-.:" (not "." or ".."), at
 * most one '@' followed by a snapshot name of the same characters, DSL_NAME_MAX at
 * most. err says what is wrong, naming the name. */
int mgmt_dataset_name_check(const char *name, unsigned allowed, char *err, size_t errlen);
/* The pool part of a dataset name (text before the first '/' or '@'). */
void mgmt_dataset_pool(const char *name, char *pool, size_t len);
/* A zfs-style size: "4096", "8K", "1.5G", "512m", "1GB", "2TiB" (base 1024, a fraction
 * rounds down to whole bytes). -EINVAL on junk, -ERANGE past 2^64-1. */
int mgmt_parse_size(const char *s, uint64_t *out);
/* `list -t`: "filesystem,volume,snapshot,all" (also fs, vol, snap) into a mask of
 * 1 << dsl_type_t. */
int mgmt_parse_types(const char *s, unsigned *mask, char *err, size_t errlen);
#define MGMT_TYPES_DEFAULT ((1u << DSL_TYPE_FILESYSTEM) | (1u << DSL_TYPE_VOLUME))
/* "filesystem", "volume", "snapshot" ("-" for anything else). */
const char *mgmt_type_name(dsl_type_t t);

/* `list -o` columns: each word becomes its canonical property name ("avail" ->
 * "available") and the header zfs shows ("AVAIL"); words not in the alias table
 * (user properties included) pass through with an upper-cased header. Which
 * properties exist is the daemon's to say. Free with free(*cols). */
typedef struct mgmt_column {
    char prop[256];
    char header[256];
} mgmt_column_t;
int mgmt_parse_columns(const char *list, mgmt_column_t **cols, size_t *ncols, char *err,
                       size_t errlen);
/* The canonical name of a property word (alias or not); returns word itself when it
 * is not an alias. */
const char *mgmt_prop_canonical(const char *word);
/* The SOURCE column: "local", "default", "inherited from X" or "-". */
void mgmt_format_source(dsl_prop_source_t src, const char *inherited_from, char *buf,
                        size_t len);

/* ---- output ---- */
typedef enum mgmt_out_mode {
    MGMT_OUT_HUMAN = 0,  /* aligned columns with a header */
    MGMT_OUT_TABS = 1,   /* -H: tab-separated, no header */
    MGMT_OUT_JSON = 2,   /* --json: {"<key>": [ {col: value, ...}, ... ]} */
} mgmt_out_mode_t;

typedef struct mgmt_table mgmt_table_t;
/* headers: column titles (upper case in human mode; lower-cased as JSON keys).
 * numeric_mask: bit i set when column i holds a number (right-aligned; a JSON number
 * when the cell parses as an integer). */
mgmt_table_t *mgmt_table_new(size_t ncols, const char *const *headers, uint32_t numeric_mask);
void mgmt_table_add_row(mgmt_table_t *t, const char *const *cells);
size_t mgmt_table_rows(const mgmt_table_t *t);
void mgmt_table_print(const mgmt_table_t *t, FILE *f, mgmt_out_mode_t mode,
                      const char *json_key);
void mgmt_table_free(mgmt_table_t *t);
/* Writes s as a JSON string literal (quotes included). */
void mgmt_json_string(FILE *f, const char *s);
/* A size for display: exact decimal bytes when exact, else "1.50G" style. */
void mgmt_format_size(uint64_t bytes, bool exact, char *buf, size_t len);

/* ---- pool status (mgmt_status.c) ---- */
enum { MGMT_SCAN_NONE, MGMT_SCAN_SCANNING, MGMT_SCAN_FINISHED, MGMT_SCAN_CANCELED };
typedef struct mgmt_scan {     /* ScrubStatus of the protocol */
    int state;                 /* MGMT_SCAN_* */
    uint64_t start_time, end_time, now;   /* wall clock seconds (now: the daemon's) */
    uint64_t to_examine, scanned, examined, repaired, errors;
    int func;                  /* 0 scrub, 1 resilver */
    uint64_t issued;           /* resilver: bytes of blocks read */
    uint64_t run_start;        /* this run of the scan (0: start_time), and the counters */
    uint64_t run_scanned, run_examined, run_issued; /* then: rates and ETA are this run's */
    bool sequential;           /* a sequential rebuild */
} mgmt_scan_t;
/* The `scan:` lines (newline-terminated) of a pool's status into buf (~512
 * bytes): rates and time to go while a scrub runs, as zpool prints them. */
void mgmt_scan_format(const mgmt_scan_t *s, char *buf, size_t len);

/* ---- pool iostat (mgmt_iostat.c) ---- */
typedef struct mgmt_iostat_counters {
    uint64_t alloc, size;                              /* bytes, as of the sample */
    uint64_t reads, writes, read_bytes, write_bytes;   /* cumulative since import */
} mgmt_iostat_counters_t;
#define MGMT_IOSTAT_CELLS 6
#define MGMT_IOSTAT_CELL 32
/* The cells of one iostat row - alloc, free, read ops/s, write ops/s, read bytes/s,
 * write bytes/s - from two samples dt_ns apart (prev NULL: counters since import,
 * dt_ns the time since). has_space false: "-" for alloc and free (leaves). exact:
 * plain numbers (-p), else "1.50M"-style sizes and "1.2K"-style counts. */
void mgmt_iostat_cells(const mgmt_iostat_counters_t *prev, const mgmt_iostat_counters_t *cur,
                       uint64_t dt_ns, bool exact, bool has_space,
                       char cells[MGMT_IOSTAT_CELLS][MGMT_IOSTAT_CELL]);

#endif

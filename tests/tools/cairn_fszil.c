/*
 * cairn_fszil: crash writer and verifier for the intent log (test_crash_zil.sh).
 *
 *   cairn_fszil writer -d DIR POOL --ack FILE --round R [--max-ops N] [--large]
 *                      [--unstable] [--logbias latency|throughput]
 *   cairn_fszil verify -d DIR POOL --ack FILE [--large]
 *
 * The writer imports the pool (force: it was crashed), mounts POOL/fs and
 * opens POOL/vol (creating both the first time; mount and open replay the
 * intent log), then runs until killed: threads doing 4 KiB volume writes with
 * FUA, threads doing 4 KiB file writes with ZPL_IO_SYNC, and one thread doing
 * create / rename / remove, each followed by zpl_commit. Every operation is
 * appended to the ack file after it returned ("V blk seq", "F file blk seq",
 * "C name", "R old new", "D name"); namespace operations also write an intent
 * line ("I ...") before they start. Blocks carry (seq, block id) and bytes
 * derived from them; seqs grow across rounds (R << 32).
 *
 * --large (test_crash_zil_indirect.sh): the data writers write 64 KiB (volume,
 * 16 KiB volblocksize) and 128 KiB (files, 128 KiB records) at 4 KiB-aligned
 * offsets, so whole records go to the log as pointers to directly written
 * blocks and the edges as copies; each thread writes its own region, and
 * every 4 KiB block of a write is acknowledged with the write's seq.
 * --logbias sets the property on both datasets before writing.
 *
 * --unstable (with --large; test_crash_zil_unstable.sh): as NFS UNSTABLE
 * writes and COMMIT, or iSCSI writes and SYNCHRONIZE CACHE: the data writers
 * write without ZPL_IO_SYNC / FUA and make every few writes durable with
 * zpl_fsync / zvol_flush, acknowledging those writes only then.
 *
 * The verifier imports the pool (replaying the log), and checks that every
 * acknowledged block holds its acknowledged write or a later one (never
 * garbage, never older), that blocks are whole, that every acknowledged
 * namespace change is there (an operation whose ack is missing may or may not
 * have happened), then exports and runs the offline check.
 */
#include <cairn/dsl.h>
#include <cairn/log.h>
#include <cairn/util.h>
#include <cairn/zpl.h>
#include <cairn/zvol.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BLK 4096
#define VOL_BLOCKS 2048
#define FILE_BLOCKS 256
#define NVOLT 3
#define NFILET 3
#define MAXNAMES 200000

static const zpl_cred_t cred = {.uid = 0, .gid = 0};

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ERROR: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

static void fill(uint8_t *b, uint64_t seq, uint64_t id)
{
    memcpy(b, &seq, 8);
    memcpy(b + 8, &id, 8);
    for (int i = 16; i < BLK; i += 8) {
        uint64_t v = mix64(seq * 1315423911u + id * 2654435761u + (uint64_t)i);
        memcpy(b + i, &v, 8);
    }
}

/* 0: zeros (never written); 1: a whole block of some seq (in *seq); -1: garbage. */
static int parse(const uint8_t *b, uint64_t id, uint64_t *seq)
{
    static const uint8_t zero[BLK];
    if (!memcmp(b, zero, BLK)) return 0;
    uint64_t s, i;
    memcpy(&s, b, 8);
    memcpy(&i, b + 8, 8);
    if (i != id) return -1;
    uint8_t want[BLK];
    fill(want, s, id);
    if (memcmp(want, b, BLK)) return -1;
    *seq = s;
    return 1;
}

typedef struct opts {
    const char *dirs[8];
    size_t ndirs;
    const char *pool;
    const char *ack;
    uint64_t round;
    uint64_t max_ops;
    bool large;
    bool unstable;
    const char *logbias;
} opts_t;

static spa_t *spa;
static dsl_pool_t *dp;
static zpl_fs_t *fs;
static zpl_node_t *root;
static zvol_t *vol;
static int ackfd;
static _Atomic uint64_t seqctr, opsdone;
static uint64_t max_ops;
static bool large, unstable;

/* --unstable: writes made durable together by the next commit, acked after it. */
#define UNSTABLE_BATCH 3
typedef struct pending {
    uint64_t first[UNSTABLE_BATCH], seq[UNSTABLE_BATCH];
    int n;
} pending_t;

#define VOL_LARGE 16   /* blocks per large volume write */
#define FILE_LARGE 32  /* blocks per large file write */

static void open_all(const opts_t *o)
{
    char err[512] = "";
    dsl_init();
    int e = spa_import(o->pool, o->dirs, o->ndirs, SPA_IMPORT_FORCE, &spa, err, sizeof err);
    if (e) die("import: %s", err);
    if ((e = dsl_pool_open(spa, &dp))) die("dsl_pool_open: %d", e);
    char name[256];
    snprintf(name, sizeof name, "%s/fs", o->pool);
    dsl_create_opts_t fo = {.type = DSL_TYPE_FILESYSTEM};
    e = dsl_dataset_create(dp, name, &fo, err, sizeof err);
    if (e && e != -EEXIST) die("create %s: %s", name, err);
    if ((e = zpl_mount(dp, name, &fs))) die("mount: %d", e);
    if ((e = zpl_root(fs, &root))) die("root: %d", e);
    snprintf(name, sizeof name, "%s/vol", o->pool);
    dsl_create_opts_t vo = {.type = DSL_TYPE_VOLUME, .volsize = (uint64_t)VOL_BLOCKS * BLK,
                            .volblocksize = o->large ? 4 * BLK : BLK, .sparse = true};
    e = dsl_dataset_create(dp, name, &vo, err, sizeof err);
    if (e && e != -EEXIST) die("create %s: %s", name, err);
    if (o->logbias) {
        char fsname[256];
        snprintf(fsname, sizeof fsname, "%s/fs", o->pool);
        if (dsl_prop_set(dp, fsname, "logbias", o->logbias, err, sizeof err) ||
            dsl_prop_set(dp, name, "logbias", o->logbias, err, sizeof err))
            die("logbias: %s", err);
    }
    if ((e = zvol_open(dp, name, &vol))) die("zvol_open: %d", e);
}

static void close_all(void)
{
    zvol_close(vol);
    zpl_node_rele(root);
    if (zpl_unmount(fs)) die("unmount");
    dsl_pool_close(dp);
    if (spa_export(spa)) die("export");
}

static void ack(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void ack(const char *fmt, ...)
{
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (write(ackfd, line, (size_t)n) != n) die("ack write");
}

static bool more(void)
{
    uint64_t d = atomic_fetch_add(&opsdone, 1);
    return !max_ops || d < max_ops;
}

/* Large writes in the thread's own region of the volume. */
static void vol_writer_large(unsigned t)
{
    uint8_t *b = aligned_alloc(4096, VOL_LARGE * BLK);
    uint64_t region = VOL_BLOCKS / NVOLT, r = mix64(t + atomic_load(&seqctr));
    pending_t pd = {0};
    while (more()) {
        r = mix64(r);
        uint64_t first = t * region + r % (region - VOL_LARGE);
        uint64_t seq = atomic_fetch_add(&seqctr, 1);
        for (int k = 0; k < VOL_LARGE; k++) fill(b + k * BLK, seq, first + k);
        int e = zvol_write(vol, first * BLK, VOL_LARGE * BLK, b, unstable ? 0 : ZVOL_WRITE_FUA);
        if (e) die("zvol_write: %d", e);
        pd.first[pd.n] = first;
        pd.seq[pd.n++] = seq;
        if (unstable && pd.n < UNSTABLE_BATCH) continue;
        if (unstable && (e = zvol_flush(vol))) die("zvol_flush: %d", e);
        for (int i = 0; i < pd.n; i++)
            for (int k = 0; k < VOL_LARGE; k++)
                ack("V %" PRIu64 " %" PRIu64 "\n", pd.first[i] + k, pd.seq[i]);
        pd.n = 0;
    }
    free(b);
}

static void *vol_writer(void *arg)
{
    unsigned t = (unsigned)(uintptr_t)arg;
    if (large) {
        vol_writer_large(t);
        return NULL;
    }
    uint8_t *b = aligned_alloc(4096, BLK);
    uint64_t r = mix64(t + atomic_load(&seqctr));
    while (more()) {
        r = mix64(r);
        uint64_t blk = (r % (VOL_BLOCKS / NVOLT)) * NVOLT + t;
        uint64_t seq = atomic_fetch_add(&seqctr, 1);
        fill(b, seq, blk);
        int e = zvol_write(vol, blk * BLK, BLK, b, ZVOL_WRITE_FUA);
        if (e) die("zvol_write: %d", e);
        ack("V %" PRIu64 " %" PRIu64 "\n", blk, seq);
    }
    free(b);
    return NULL;
}

static void *file_writer(void *arg)
{
    unsigned t = (unsigned)(uintptr_t)arg;
    char name[32];
    snprintf(name, sizeof name, "f%u", t);
    zpl_node_t *n;
    int e = zpl_lookup(root, name, &n);
    if (e == -ENOENT) {
        e = zpl_create(root, name, 0644, &cred, ZPL_CREATE_UNCHECKED, NULL, &n, NULL);
        if (!e) e = zpl_commit(fs);
    }
    if (e) die("file %s: %d", name, e);
    uint8_t b[BLK];
    uint64_t r = mix64(t * 77 + atomic_load(&seqctr));
    pending_t pd = {0};
    while (large && more()) {
        static _Thread_local uint8_t big[FILE_LARGE * BLK];
        r = mix64(r);
        /* Half record-aligned (whole records), half not (partial edges too). */
        uint64_t first = r % (FILE_BLOCKS - FILE_LARGE + 1);
        if (r & (1ULL << 40)) first -= first % FILE_LARGE;
        uint64_t seq = atomic_fetch_add(&seqctr, 1);
        for (int k = 0; k < FILE_LARGE; k++) fill(big + k * BLK, seq, t * 100000 + first + k);
        e = zpl_write(n, first * BLK, sizeof big, big, unstable ? 0 : ZPL_IO_SYNC, NULL);
        if (e) die("zpl_write: %d", e);
        pd.first[pd.n] = first;
        pd.seq[pd.n++] = seq;
        if (unstable && pd.n < UNSTABLE_BATCH) continue;
        if (unstable && (e = zpl_fsync(n))) die("zpl_fsync: %d", e);
        for (int i = 0; i < pd.n; i++)
            for (int k = 0; k < FILE_LARGE; k++)
                ack("F %u %" PRIu64 " %" PRIu64 "\n", t, pd.first[i] + k, pd.seq[i]);
        pd.n = 0;
    }
    while (!large && more()) {
        r = mix64(r);
        uint64_t blk = r % FILE_BLOCKS, id = t * 100000 + blk;
        uint64_t seq = atomic_fetch_add(&seqctr, 1);
        fill(b, seq, id);
        e = zpl_write(n, blk * BLK, BLK, b, ZPL_IO_SYNC, NULL);
        if (e) die("zpl_write: %d", e);
        ack("F %u %" PRIu64 " %" PRIu64 "\n", t, blk, seq);
    }
    zpl_node_rele(n);
    return NULL;
}

static void *ns_writer(void *arg)
{
    uint64_t round = (uint64_t)(uintptr_t)arg;
    for (uint64_t i = 0; more(); i++) {
        char a[64], b[64], old[64];
        snprintf(a, sizeof a, "n%" PRIu64 "_%" PRIu64, round, i);
        snprintf(b, sizeof b, "r%" PRIu64 "_%" PRIu64, round, i);
        ack("I C %s\n", a);
        int e = zpl_create(root, a, 0644, &cred, ZPL_CREATE_GUARDED, NULL, NULL, NULL);
        if (!e) e = zpl_commit(fs);
        if (e) die("create %s: %d", a, e);
        ack("C %s\n", a);
        ack("I R %s %s\n", a, b);
        e = zpl_rename(root, a, root, b, NULL, NULL);
        if (!e) e = zpl_commit(fs);
        if (e) die("rename %s: %d", a, e);
        ack("R %s %s\n", a, b);
        if (i >= 3) {
            snprintf(old, sizeof old, "r%" PRIu64 "_%" PRIu64, round, i - 3);
            ack("I D %s\n", old);
            e = zpl_remove(root, old, NULL);
            if (!e) e = zpl_commit(fs);
            if (e) die("remove %s: %d", old, e);
            ack("D %s\n", old);
        }
    }
    return NULL;
}

static int run_writer(const opts_t *o)
{
    ackfd = open(o->ack, O_RDWR | O_APPEND | O_CREAT, 0644);
    if (ackfd < 0) die("open %s", o->ack);
    /* A writer killed inside an ack's write may have left a torn last line; mark it
     * torn and end it, so this round's first ack is a line of its own and verify
     * skips the fragment (it could parse as a shorter, wrong ack). */
    off_t end = lseek(ackfd, 0, SEEK_END);
    char lastc = '\n';
    if (end > 0 && pread(ackfd, &lastc, 1, end - 1) != 1) die("read %s", o->ack);
    if (lastc != '\n' && write(ackfd, " #torn\n", 7) != 7) die("ack write");
    open_all(o);
    atomic_store(&seqctr, (o->round << 32) + 1);
    max_ops = o->max_ops;
    large = o->large;
    unstable = o->unstable;
    printf("ready\n");
    fflush(stdout);
    pthread_t th[NVOLT + NFILET + 1];
    int n = 0;
    for (unsigned t = 0; t < NVOLT; t++) pthread_create(&th[n++], NULL, vol_writer, (void *)(uintptr_t)t);
    for (unsigned t = 0; t < NFILET; t++) pthread_create(&th[n++], NULL, file_writer, (void *)(uintptr_t)t);
    pthread_create(&th[n++], NULL, ns_writer, (void *)(uintptr_t)o->round);
    for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
    close_all();
    close(ackfd);
    return 0;
}

/* ---------------- verify ---------------- */

typedef struct nsent {
    char name[64];
    int state;      /* 1 present, 0 absent */
    bool doubt;     /* an unacknowledged operation touched it */
} nsent_t;

static nsent_t *names;
static size_t nnames;

static nsent_t *ns_get(const char *name)
{
    for (size_t i = nnames; i-- > 0;)
        if (!strcmp(names[i].name, name)) return &names[i];
    if (nnames == MAXNAMES) die("too many names");
    nsent_t *e = &names[nnames++];
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", name);
    return e;
}

static int run_verify(const opts_t *o)
{
    static uint64_t vacked[VOL_BLOCKS], facked[NFILET][FILE_BLOCKS];
    names = calloc(MAXNAMES, sizeof *names);
    FILE *f = fopen(o->ack, "r");
    if (!f) die("open %s", o->ack);
    char line[256], pend[256] = "";
    uint64_t nacks = 0;
    while (fgets(line, sizeof line, f)) {
        uint64_t a, b;
        unsigned t;
        char x[64], y[64];
        size_t len = strlen(line);
        if (len == 0 || line[len - 1] != '\n' || strstr(line, "#torn")) continue; /* torn */
        if (sscanf(line, "V %" SCNu64 " %" SCNu64, &a, &b) == 2) {
            if (a < VOL_BLOCKS && b > vacked[a]) vacked[a] = b;
        } else if (sscanf(line, "F %u %" SCNu64 " %" SCNu64, &t, &a, &b) == 3) {
            if (t < NFILET && a < FILE_BLOCKS && b > facked[t][a]) facked[t][a] = b;
        } else if (line[0] == 'I') {
            snprintf(pend, sizeof pend, "%s", line);
            continue;
        } else if (sscanf(line, "C %63s", x) == 1) {
            ns_get(x)->state = 1;
        } else if (sscanf(line, "R %63s %63s", x, y) == 2) {
            ns_get(x)->state = 0;
            ns_get(y)->state = 1;
        } else if (sscanf(line, "D %63s", x) == 1) {
            ns_get(x)->state = 0;
        }
        if (line[0] == 'C' || line[0] == 'R' || line[0] == 'D') pend[0] = 0;
        nacks++;
        /* An intent never acknowledged (the writer was killed in it) is in doubt. */
    }
    fclose(f);
    /* Re-read to mark every intent without its ack as in doubt. */
    f = fopen(o->ack, "r");
    char last_intent[256] = "";
    while (fgets(line, sizeof line, f)) {
        if (strstr(line, "#torn")) continue;
        if (line[0] == 'I') {
            if (last_intent[0]) {
                char op, x[64], y[64] = "";
                if (sscanf(last_intent, "I %c %63s %63s", &op, x, y) >= 2) {
                    ns_get(x)->doubt = true;
                    if (y[0]) ns_get(y)->doubt = true;
                }
            }
            snprintf(last_intent, sizeof last_intent, "%s", line);
        } else if (line[0] == 'C' || line[0] == 'R' || line[0] == 'D') {
            last_intent[0] = 0;
        }
    }
    if (last_intent[0]) {
        char op, x[64], y[64] = "";
        if (sscanf(last_intent, "I %c %63s %63s", &op, x, y) >= 2) {
            ns_get(x)->doubt = true;
            if (y[0]) ns_get(y)->doubt = true;
        }
    }
    fclose(f);

    open_all(o);
    uint8_t *b = aligned_alloc(4096, BLK);
    uint64_t checked = 0;
    for (uint64_t blk = 0; blk < VOL_BLOCKS; blk++) {
        if (zvol_read(vol, blk * BLK, BLK, b)) die("zvol_read");
        uint64_t s = 0;
        int p = parse(b, blk, &s);
        if (p < 0) die("volume block %" PRIu64 ": not a whole block of any write", blk);
        if (vacked[blk] && (p == 0 || s < vacked[blk]))
            die("volume block %" PRIu64 ": acknowledged write %" PRIu64 " lost (found %" PRIu64 ")",
                blk, vacked[blk], s);
        checked += vacked[blk] != 0;
    }
    for (unsigned t = 0; t < NFILET; t++) {
        char name[32];
        snprintf(name, sizeof name, "f%u", t);
        zpl_node_t *n;
        if (zpl_lookup(root, name, &n)) {
            for (int k = 0; k < FILE_BLOCKS; k++)
                if (facked[t][k]) die("file %s missing", name);
            continue;
        }
        for (uint64_t k = 0; k < FILE_BLOCKS; k++) {
            size_t got = 0;
            memset(b, 0, BLK);
            if (zpl_read(n, k * BLK, BLK, b, &got, NULL)) die("zpl_read");
            uint64_t s = 0;
            int p = parse(b, t * 100000 + k, &s);
            if (p < 0) die("file %s block %" PRIu64 ": not a whole block of any write", name, k);
            if (facked[t][k] && (p == 0 || s < facked[t][k]))
                die("file %s block %" PRIu64 ": acknowledged write %" PRIu64 " lost (found %" PRIu64 ")",
                    name, k, facked[t][k], s);
            checked += facked[t][k] != 0;
        }
        zpl_node_rele(n);
    }
    uint64_t nsok = 0;
    for (size_t i = 0; i < nnames; i++) {
        if (names[i].doubt) continue;
        zpl_node_t *n;
        int e = zpl_lookup(root, names[i].name, &n);
        if (!e) zpl_node_rele(n);
        if ((e == 0) != (names[i].state == 1))
            die("name %s: acknowledged as %s but %s", names[i].name,
                names[i].state ? "present" : "removed", e == 0 ? "present" : "absent");
        nsok++;
    }
    free(b);
    close_all();
    spa_check_report_t rep;
    char err[512] = "";
    int e = spa_check(o->pool, o->dirs, o->ndirs, &rep, err, sizeof err);
    if (e) die("check: %s", err);
    printf("verified %" PRIu64 " acknowledged blocks and %" PRIu64 " names (%" PRIu64 " acks); check clean\n",
           checked, nsok, nacks);
    free(names);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) die("usage: cairn_fszil writer|verify -d DIR POOL --ack FILE [--round R] [--max-ops N]");
    opts_t o = {0};
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "-d") && i + 1 < argc && o.ndirs < 8) o.dirs[o.ndirs++] = argv[++i];
        else if (!strcmp(argv[i], "--ack") && i + 1 < argc) o.ack = argv[++i];
        else if (!strcmp(argv[i], "--round") && i + 1 < argc) o.round = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--max-ops") && i + 1 < argc) o.max_ops = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--large")) o.large = true;
        else if (!strcmp(argv[i], "--unstable")) o.unstable = true;
        else if (!strcmp(argv[i], "--logbias") && i + 1 < argc) o.logbias = argv[++i];
        else o.pool = argv[i];
    }
    if (!o.pool || !o.ack || !o.ndirs) die("missing arguments");
    if (!strcmp(argv[1], "writer")) return run_writer(&o);
    if (!strcmp(argv[1], "verify")) return run_verify(&o);
    die("unknown command %s", argv[1]);
}

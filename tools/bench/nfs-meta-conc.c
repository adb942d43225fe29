/*
 * nfs-meta-conc: empty-file CREATE and REMOVE from many NFS clients at once,
 * for tools/bench/nfs-meta.sh (BENCH_CLIENTS). Never pass/fail.
 *
 *   nfs-meta-conc URL CLIENTS FILES [SERVER_PID [shared]]
 *
 * CLIENTS processes, each with its own libnfs context and TCP connection and
 * one call in flight, as many hosts of a grid would be; FILES is the total
 * number of files, split between them. Each client works in its own directory,
 * or with "shared" all in one, so a server that serializes per directory
 * shows it. ../shared/peers/nfs-meta-bench.c is the one-client benchmark; it
 * runs its phases unsynchronized, so several of them at once would overlap
 * one's creates with another's removes: here every phase starts on a barrier
 * for all clients and ends when the last one is done, so the rate is the
 * aggregate (files / wall time of the phase), and the server's CPU time
 * (utime + stime of SERVER_PID, from /proc) is sampled at the same barriers.
 *
 * Output: key=value lines, create_ops_per_sec, unlink_ops_per_sec,
 * create_cpu_us_per_op, unlink_cpu_us_per_op (the last two with SERVER_PID).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <nfsc/libnfs.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { PHASES = 2 };
static const char *const phase_names[PHASES] = {"create", "unlink"};

struct shared {
    pthread_barrier_t barrier;
    int failed;
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* utime + stime of pid in clock ticks, or -1. */
static double cpu_ticks(long pid)
{
    char path[64], buf[2048];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    if (!p) return -1;
    unsigned long ut = 0, st = 0;
    /* after ") ": state(3) ... utime is field 14, stime 15 */
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return -1;
    return (double)ut + (double)st;
}

/* A barrier wait that a failed client cannot turn into a hang: a client that
 * fails still walks through every barrier, doing no work. */
static void wait_all(struct shared *sh) { pthread_barrier_wait(&sh->barrier); }

static void client(struct shared *sh, const char *urlstr, int id, long first, long count,
                   const char *dir, bool own_dir)
{
    struct nfs_context *nfs = nfs_init_context();
    struct nfs_url *url = nfs ? nfs_parse_url_dir(nfs, urlstr) : NULL;
    char path[256];
    bool ok = url && nfs_mount(nfs, url->server, url->path) == 0;
    if (!ok) fprintf(stderr, "nfs-meta-conc: client %d: mount: %s\n", id, nfs ? nfs_get_error(nfs) : "");
    if (ok && own_dir && nfs_mkdir(nfs, dir) != 0) {
        fprintf(stderr, "nfs-meta-conc: client %d: mkdir %s: %s\n", id, dir, nfs_get_error(nfs));
        ok = false;
    }
    if (!ok) sh->failed = 1;
    wait_all(sh); /* everyone mounted */
    for (int phase = 0; phase < PHASES; phase++) {
        wait_all(sh); /* start */
        for (long i = first; ok && i < first + count; i++) {
            snprintf(path, sizeof path, "%s/f%07ld", dir, i);
            if (phase == 0) {
                struct nfsfh *fh;
                ok = nfs_create(nfs, path, O_WRONLY, 0644, &fh) == 0 && nfs_close(nfs, fh) == 0;
            } else {
                ok = nfs_unlink(nfs, path) == 0;
            }
            if (!ok) {
                fprintf(stderr, "nfs-meta-conc: client %d: %s %s: %s\n", id, phase_names[phase], path,
                        nfs_get_error(nfs));
                sh->failed = 1;
            }
        }
        wait_all(sh); /* done */
    }
    if (ok && own_dir && nfs_rmdir(nfs, dir) != 0) sh->failed = 1;
    if (url) nfs_destroy_url(url);
    if (nfs) nfs_destroy_context(nfs);
    _exit(0);
}

int main(int argc, char **argv)
{
    if (argc < 4 || argc > 6) {
        fprintf(stderr, "usage: %s URL CLIENTS FILES [SERVER_PID [shared]]\n", argv[0]);
        return 2;
    }
    const char *url = argv[1];
    int clients = atoi(argv[2]);
    long files = strtol(argv[3], NULL, 0);
    long server = argc > 4 ? strtol(argv[4], NULL, 0) : 0;
    bool shared = argc > 5 && !strcmp(argv[5], "shared");
    if (clients < 1 || files < clients) {
        fprintf(stderr, "nfs-meta-conc: need CLIENTS >= 1 and FILES >= CLIENTS\n");
        return 2;
    }
    struct shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) return 1;
    pthread_barrierattr_t ba;
    pthread_barrierattr_init(&ba);
    pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
    pthread_barrier_init(&sh->barrier, &ba, (unsigned)clients + 1);

    /* The shared directory is made here, before the clients start; a client's
     * own directory by the client. */
    char shared_dir[64] = "";
    struct nfs_context *nfs = NULL;
    struct nfs_url *u = NULL;
    if (shared) {
        snprintf(shared_dir, sizeof shared_dir, "/nfs-meta-conc.%d", (int)getpid());
        nfs = nfs_init_context();
        u = nfs ? nfs_parse_url_dir(nfs, url) : NULL;
        if (!u || nfs_mount(nfs, u->server, u->path) != 0 || nfs_mkdir(nfs, shared_dir) != 0) {
            fprintf(stderr, "nfs-meta-conc: shared directory: %s\n", nfs ? nfs_get_error(nfs) : "");
            return 1;
        }
    }
    long per = files / clients, extra = files % clients, first = 0;
    for (int id = 0; id < clients; id++) {
        long count = per + (id < extra);
        char dir[64];
        if (shared) snprintf(dir, sizeof dir, "%s", shared_dir);
        else snprintf(dir, sizeof dir, "/nfs-meta-conc.%d.c%d", (int)getpid(), id);
        pid_t pid = fork();
        if (pid < 0) return 1;
        if (pid == 0) client(sh, url, id, first, count, dir, !shared);
        first += count;
    }
    double t[PHASES + 1], c[PHASES + 1];
    wait_all(sh); /* mounted */
    for (int phase = 0; phase < PHASES; phase++) {
        c[phase] = server ? cpu_ticks(server) : 0;
        t[phase] = now();
        wait_all(sh);
        wait_all(sh);
        t[phase + 1] = now();
        c[phase + 1] = server ? cpu_ticks(server) : 0;
        double secs = t[phase + 1] - t[phase];
        printf("%s_ops_per_sec=%.1f\n", phase_names[phase], secs > 0 ? files / secs : 0.0);
        if (server)
            printf("%s_cpu_us_per_op=%.1f\n", phase_names[phase],
                   (c[phase + 1] - c[phase]) * 1e6 / sysconf(_SC_CLK_TCK) / files);
    }
    int status, rc = 0;
    while (wait(&status) > 0)
        if (!WIFEXITED(status) || WEXITSTATUS(status)) rc = 1;
    if (shared && nfs_rmdir(nfs, shared_dir) != 0) rc = 1;
    if (u) nfs_destroy_url(u);
    if (nfs) nfs_destroy_context(nfs);
    printf("clients=%d\nfiles=%ld\n", clients, files);
    return rc || sh->failed;
}

/*
 * bench_nfs_loopsend: what one large READ reply at a time costs to send over
 * loopback TCP, and what a server could save, without any server around it.
 *
 *   bench_nfs_loopsend [MIB_PER_RUN [RUNS [REPLY_KIB [DEPTH [MODE]]]]]
 *                                               (default 4096 7 1024 1 all)
 *
 * A forked client asks for REPLY_KIB and reads all of it before asking again,
 * as nfs-cat does with one 1 MiB READ in flight (DEPTH > 1: it keeps that many
 * asks outstanding, as a client's read-ahead does); the parent answers each ask
 * from one buffer that is already in memory (an ARC hit) in one of four ways:
 *
 *   copy      write(2) of the buffer: what cairnd does (sendmsg over the
 *             ARC's buffers); the kernel copies it into socket buffers
 *   zerocopy  send(MSG_ZEROCOPY) and reaping the completions: the safe
 *             zero-copy send, which on loopback copies anyway when the
 *             receiver's socket takes the data
 *   splice    vmsplice(2) of the buffer into a pipe and splice(2) to the
 *             socket: the receiver reads from the server's own pages; nothing
 *             tells the server when it may write those pages again
 *   splice+recycle   the same, then the buffer handed back as memory is
 *             when an ARC buffer is evicted and reused: MADV_DONTNEED (so the
 *             pages still queued keep their data) and filled again, which
 *             faults in and clears fresh pages
 *
 * MODE names one of them to run alone (nfs-throughput.sh's floor takes copy);
 * all runs the four, alternating inside each run. Per mode the median MiB/s
 * and the server's CPU-seconds per GiB (getrusage of the parent: the client is
 * another process) are printed. This bounds what any NFS server can do with
 * DEPTH READs in flight on this machine (docs/benchmarks.md, sessions 17 and
 * 19). Never a test.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { MODE_COPY, MODE_ZEROCOPY, MODE_SPLICE, MODE_SPLICE_RECYCLE, MODES };
static const char *mode_name[MODES] = {"copy", "zerocopy", "splice", "splice+recycle"};

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_self(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static void write_all(int fd, const uint8_t *p, size_t len, int flags)
{
    while (len > 0) {
        ssize_t n = send(fd, p, len, flags);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == ENOBUFS) /* zerocopy: too many completions unread */
                continue;
            die("send");
        }
        p += n;
        len -= (size_t)n;
    }
}

static void splice_all(int fd, int pipe_rd, int pipe_wr, uint8_t *p, size_t len)
{
    while (len > 0) {
        struct iovec iov = {p, len};
        ssize_t in = vmsplice(pipe_wr, &iov, 1, 0);
        if (in < 0)
            die("vmsplice");
        for (size_t left = (size_t)in; left > 0;) {
            ssize_t out = splice(pipe_rd, NULL, fd, NULL, left,
                                 SPLICE_F_MOVE | ((size_t)in < len ? SPLICE_F_MORE : 0));
            if (out < 0)
                die("splice");
            left -= (size_t)out;
        }
        p += in;
        len -= (size_t)in;
    }
}

static void reap_zerocopy(int fd)
{
    for (;;) {
        char control[128];
        struct msghdr mh = {.msg_control = control, .msg_controllen = sizeof control};
        if (recvmsg(fd, &mh, MSG_ERRQUEUE | MSG_DONTWAIT) < 0)
            return;
    }
}

static void client(struct sockaddr_in addr, size_t reply, size_t asks, size_t depth)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0)
        die("client connect");
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    uint8_t *buf = malloc(reply);
    size_t asked = 0;
    for (size_t i = 0; i < asks; i++) {
        for (; asked < asks && asked < i + depth; asked++)
            if (write(fd, "ask!", 4) != 4)
                die("client ask");
        for (size_t got = 0; got < reply;) {
            ssize_t n = read(fd, buf + got, reply - got);
            if (n <= 0)
                die("client read");
            got += (size_t)n;
        }
    }
    exit(0);
}

/* One run of one mode: RETURNS MiB/s, *cpu_per_gib the server's CPU. */
static double run(int mode, int listener, struct sockaddr_in addr, uint8_t *buf, size_t reply,
                  size_t asks, size_t depth, double *cpu_per_gib)
{
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0)
        client(addr, reply, asks, depth);
    int fd = accept(listener, NULL, NULL), one = 1, pipefd[2];
    if (fd < 0)
        die("accept");
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (mode == MODE_ZEROCOPY && setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof one) < 0)
        die("SO_ZEROCOPY");
    if (pipe(pipefd) < 0)
        die("pipe");
    fcntl(pipefd[1], F_SETPIPE_SZ, (int)reply); /* best effort: pipe-max-size */

    double t0 = wall_now(), c0 = cpu_self();
    for (size_t i = 0; i < asks; i++) {
        char ask[4];
        for (size_t got = 0; got < sizeof ask;) {
            ssize_t n = read(fd, ask + got, sizeof ask - got);
            if (n <= 0)
                die("server read");
            got += (size_t)n;
        }
        switch (mode) {
        case MODE_COPY:
            write_all(fd, buf, reply, 0);
            break;
        case MODE_ZEROCOPY:
            write_all(fd, buf, reply, MSG_ZEROCOPY);
            reap_zerocopy(fd);
            break;
        case MODE_SPLICE:
            splice_all(fd, pipefd[0], pipefd[1], buf, reply);
            break;
        case MODE_SPLICE_RECYCLE:
            splice_all(fd, pipefd[0], pipefd[1], buf, reply);
            if (madvise(buf, reply, MADV_DONTNEED) < 0)
                die("madvise");
            memset(buf, (int)i, reply);
            break;
        }
    }
    double secs = wall_now() - t0, cpu = cpu_self() - c0;
    int status;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "client failed\n");
        exit(1);
    }
    close(fd);
    close(pipefd[0]);
    close(pipefd[1]);
    double gib = (double)reply * (double)asks / (double)(1u << 30);
    *cpu_per_gib = cpu / gib;
    return gib * 1024.0 / secs;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 4096;
    int runs = argc > 2 ? atoi(argv[2]) : 7;
    size_t reply = (argc > 3 ? strtoul(argv[3], NULL, 10) : 1024) << 10;
    size_t depth = argc > 4 ? strtoul(argv[4], NULL, 10) : 1;
    int only = -1; /* all modes */
    if (argc > 5 && strcmp(argv[5], "all") != 0) {
        for (int m = 0; m < MODES; m++)
            if (strcmp(argv[5], mode_name[m]) == 0)
                only = m;
        if (only < 0) {
            fprintf(stderr, "bench_nfs_loopsend: unknown mode '%s'\n", argv[5]);
            return 2;
        }
    }
    if (mib == 0 || runs <= 0 || runs > 100 || reply == 0 || reply > (64u << 20) || depth == 0 ||
        depth > 64) {
        fprintf(stderr, "usage: bench_nfs_loopsend [MIB_PER_RUN [RUNS (1-100) [REPLY_KIB "
                        "[DEPTH (1-64) [all|copy|zerocopy|splice|splice+recycle]]]]]\n");
        return 2;
    }
    size_t asks = (mib << 20) / reply;
    if (asks == 0)
        asks = 1;

    int listener = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    socklen_t alen = sizeof addr;
    if (listener < 0 || bind(listener, (struct sockaddr *)&addr, sizeof addr) < 0 ||
        listen(listener, 1) < 0 || getsockname(listener, (struct sockaddr *)&addr, &alen) < 0)
        die("listen");

    /* Whole pages of its own, as an ARC buffer would need to be spliced safely. */
    uint8_t *buf = aligned_alloc(4096, (reply + 4095) & ~(size_t)4095);
    if (!buf)
        die("aligned_alloc");
    for (size_t i = 0; i < reply; i++)
        buf[i] = (uint8_t)(i * 7);

    double rate[MODES][100], cpu[MODES][100];
    for (int r = 0; r < runs; r++)
        for (int m = 0; m < MODES; m++)
            if (only < 0 || m == only)
                rate[m][r] = run(m, listener, addr, buf, reply, asks, depth, &cpu[m][r]);

    printf("%zu KiB replies, %zu in flight, %zu MiB per run, median of %d runs\n", reply >> 10,
           depth, mib, runs);
    printf("| mode | MiB/s | server CPU-s/GiB |\n|---|---:|---:|\n");
    for (int m = 0; m < MODES; m++)
        if (only < 0 || m == only)
            printf("| %s | %.0f | %.3f |\n", mode_name[m], median(rate[m], runs), median(cpu[m], runs));
    return 0;
}

/*
 * cairnd: the daemon that owns the pools and answers the `cairn` CLI on an
 * admin UNIX socket.
 *
 * Start-up order matters and is chosen so that every mistake an administrator
 * can make is reported on the terminal that started us, with a non-zero exit:
 * configuration (file, then command-line overrides), the state directory, the
 * single-instance lock (flock on state_dir/cairnd.lock, released by the kernel
 * if we die, so a crash never leaves a stale lock), and the socket are all set
 * up before daemonizing. The foreground parent then waits on a pipe until the
 * daemon has imported its cached pools and is about to serve; so when `cairnd`
 * returns 0 the pools are back and the socket answers, which is what scripts
 * and tests want.
 *
 * Serving: the main thread polls the listening socket and a signalfd. Each
 * client gets a detached thread that reads framed requests until the client
 * hangs up; a client that sends garbage or an oversized frame gets an error
 * response or is disconnected, touching nothing shared. SIGTERM/SIGINT let
 * the requests in flight finish (later ones are told cairnd is shutting down),
 * close every pool cleanly (spa_close) and exit 0; the cache file is left as
 * is so the next start imports the same pools.
 *
 * Under systemd (conf/cairnd.service) cairnd runs with --foreground and tells
 * the service manager the same thing the ready pipe tells a terminal, through
 * sd_notify (service.c); the main loop's poll wakes for the watchdog ping.
 */
#include "cairnd.h"

#include <cairn/bufpool.h>
#include <cairn/dsl.h>
#include <cairn/log.h>
#include <cairn/util.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define SUB "cairnd"
#define MAX_CLIENTS 128

static _Atomic int g_nclients;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("cairnd: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: cairnd [--config FILE] [--state-dir DIR] [--socket PATH] [--foreground]\n"
            "              [--nfs-listen ADDR:PORT] [--mount-listen ADDR:PORT]\n"
            "              [--portmap-listen ADDR:PORT] [--iscsi-listen ADDR:PORT]\n"
            "              [--http-listen ADDR:PORT]\n"
            "defaults: config %s (when it exists), state dir %s, socket STATE_DIR/cairnd.sock\n",
            CAIRN_DEFAULT_CONFIG, CAIRN_DEFAULT_STATE_DIR);
}

/* Start-up failed after the pools were imported: close everything and tell the
 * terminal that started us (or stderr in the foreground), exit 1. */
static void front_end_failed(int ready_fd, const char *err) __attribute__((noreturn));
static void front_end_failed(int ready_fd, const char *err)
{
    cairnd_http_stop();
    cairnd_shares_stop();
    cairnd_iscsi_stop();
    cairnd_pools_shutdown();
    if (ready_fd >= 0) {
        dprintf(ready_fd, "%s", err);
        _exit(1);
    }
    die("%s", err);
}

/* Tests only: CAIRND_DEBUG_DELAY_EXPORTS_MS=N sleeps N ms between binding the NFS
 * port and exporting the shares at start-up, to widen the window in which a
 * client could reach the port before its export exists (see main). */
static void debug_delay_exports(void)
{
    const char *v = getenv("CAIRND_DEBUG_DELAY_EXPORTS_MS");
    if (!v || !*v) return;
    char *end;
    long ms = strtol(v, &end, 10);
    if (*end || ms <= 0 || ms > 600000) return;
    log_warn(SUB, "CAIRND_DEBUG_DELAY_EXPORTS_MS: exporting shares only in %ld ms (a test knob)",
             ms);
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* mkdir -p with mode 0700 for what we create. */
static int make_dirs(const char *path)
{
    char buf[MGMT_PATH_MAX];
    cairn_strlcpy(buf, path, sizeof buf);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0700) && errno != EEXIST) return -errno;
        *p = '/';
    }
    if (mkdir(buf, 0700) && errno != EEXIST) return -errno;
    struct stat st;
    if (stat(buf, &st)) return -errno;
    if (!S_ISDIR(st.st_mode)) return -ENOTDIR;
    return 0;
}

/* ---------------------------------------------------------------- clients */

/* The admin requests being handled. Client threads are detached, and a handler
 * may be using anything shut_down takes apart (a pool, the analytics), so
 * shutting down first closes this gate and waits until none is in flight; a
 * request arriving after that is answered "shutting down". */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t idle;
    unsigned busy;
    bool closed;
} g_requests = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, false};

static bool request_begin(void)
{
    pthread_mutex_lock(&g_requests.lock);
    bool open = !g_requests.closed;
    if (open) g_requests.busy++;
    pthread_mutex_unlock(&g_requests.lock);
    return open;
}

static void request_end(void)
{
    pthread_mutex_lock(&g_requests.lock);
    if (--g_requests.busy == 0) pthread_cond_broadcast(&g_requests.idle);
    pthread_mutex_unlock(&g_requests.lock);
}

static void requests_drain(void)
{
    pthread_mutex_lock(&g_requests.lock);
    g_requests.closed = true;
    while (g_requests.busy) pthread_cond_wait(&g_requests.idle, &g_requests.lock);
    pthread_mutex_unlock(&g_requests.lock);
}

static void *client_thread(void *arg)
{
    int fd = (int)(intptr_t)arg;
    for (;;) {
        uint8_t *buf = NULL;
        size_t len = 0;
        int rc = mgmt_frame_recv(fd, &buf, &len);
        if (rc == -ENOTCONN) break;
        Cairn__Mgmt__Response resp;
        cairn__mgmt__response__init(&resp);
        cairnd_arena_t arena = {0};
        Cairn__Mgmt__Request *req = NULL;
        bool close_after = false;
        if (rc == -EMSGSIZE) {
            resp.error = -EMSGSIZE;
            resp.message = (char *)"request larger than the 16 MiB frame limit";
            close_after = true; /* the rest of the stream cannot be trusted */
        } else if (rc) {
            log_debug(SUB, "client dropped mid-request: %s", strerror(-rc));
            break;
        } else {
            req = cairn__mgmt__request__unpack(NULL, len, buf);
            if (!req) {
                resp.error = -EBADMSG;
                resp.message = (char *)"malformed request (not a cairn.mgmt.Request)";
            } else if (!request_begin()) {
                resp.error = -ESHUTDOWN;
                resp.message = (char *)"cairnd is shutting down";
                close_after = true;
            } else {
                cairnd_handle_request(req, &resp, &arena);
                request_end();
            }
        }
        free(buf);
        size_t plen = cairn__mgmt__response__get_packed_size(&resp);
        uint8_t *out = malloc(plen ? plen : 1);
        int src = -ENOMEM;
        if (out) {
            cairn__mgmt__response__pack(&resp, out);
            src = mgmt_frame_send(fd, out, plen);
            free(out);
        }
        if (req) cairn__mgmt__request__free_unpacked(req, NULL);
        cairnd_arena_free(&arena);
        if (src || close_after) break;
    }
    close(fd);
    atomic_fetch_sub(&g_nclients, 1);
    return NULL;
}

static void accept_one(int lfd)
{
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) {
        if (errno != EINTR && errno != EAGAIN) log_warn(SUB, "accept: %s", strerror(errno));
        return;
    }
    if (atomic_fetch_add(&g_nclients, 1) >= MAX_CLIENTS) {
        atomic_fetch_sub(&g_nclients, 1);
        log_warn(SUB, "too many clients (%d); refusing one", MAX_CLIENTS);
        close(fd);
        return;
    }
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    if (pthread_create(&t, &attr, client_thread, (void *)(intptr_t)fd)) {
        log_warn(SUB, "cannot start a client thread");
        close(fd);
        atomic_fetch_sub(&g_nclients, 1);
    }
    pthread_attr_destroy(&attr);
}

/* ---------------------------------------------------------------- start-up */

static int open_socket(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path) die("socket path too long: %s", path);
    cairn_strlcpy(sa.sun_path, path, sizeof sa.sun_path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) die("socket: %s", strerror(errno));
    /* We hold the instance lock, so a socket file left here is a dead daemon's. */
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) die("%s exists and is not a socket", path);
        unlink(path);
    }
    /* Bind with a tight umask so the socket is never reachable by others, even briefly. */
    mode_t old = umask(0177);
    int rc = bind(fd, (struct sockaddr *)&sa, sizeof sa);
    umask(old);
    if (rc) die("cannot bind %s: %s", path, strerror(errno));
    if (chmod(path, 0600)) die("chmod %s: %s", path, strerror(errno));
    if (listen(fd, 64)) die("listen %s: %s", path, strerror(errno));
    return fd;
}

static void write_pid_file(const char *state_dir)
{
    char path[MGMT_PATH_MAX + 16], tmp[MGMT_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/cairnd.pid", state_dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f || fprintf(f, "%ld\n", (long)getpid()) < 0 || fclose(f) || rename(tmp, path))
        log_warn(SUB, "cannot write %s: %s", path, strerror(errno));
}

/* Double fork; returns in the daemon with ready_fd open (write end). The original
 * process waits for the daemon's first message on the pipe and exits with it. */
static int daemonize(const char *log_path)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC)) die("pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0) die("fork: %s", strerror(errno));
    if (pid > 0) {
        close(pfd[1]);
        char msg[1024];
        ssize_t n, got = 0;
        while ((n = read(pfd[0], msg + got, sizeof msg - 1 - (size_t)got)) > 0) got += n;
        msg[got] = '\0';
        if (got > 0 && !strcmp(msg, "ok")) _exit(0);
        fprintf(stderr, "cairnd: %s\n", got > 0 ? msg : "daemon exited during start-up");
        _exit(1);
    }
    close(pfd[0]);
    if (setsid() < 0) die("setsid: %s", strerror(errno));
    pid = fork();
    if (pid < 0) die("fork: %s", strerror(errno));
    if (pid > 0) _exit(0);
    if (chdir("/")) { /* nothing sensible to do; paths are absolute anyway */
    }
    int null = open("/dev/null", O_RDWR);
    int logfd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (null < 0 || logfd < 0) {
        dprintf(pfd[1], "cannot open %s: %s", logfd < 0 ? log_path : "/dev/null",
                strerror(errno));
        _exit(1);
    }
    dup2(null, 0);
    dup2(null, 1);
    dup2(logfd, 2);
    close(null);
    close(logfd);
    return pfd[1];
}

/* Every connection of the front ends takes a descriptor, beside the pools'
 * devices and the admin clients: with the common soft limit of 1024, accept()
 * would fail long before the connection caps are reached (and a listener that
 * cannot accept stays readable). Raises the soft limit as far as the caps need
 * and the hard limit allows, and says so when that is not enough. */
static void raise_fd_limit(const cairnd_config_t *cfg)
{
    rlim_t want = (rlim_t)cfg->nfs_max_conns + cfg->iscsi_max_conns + 1024;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl)) return;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) || getrlimit(RLIMIT_NOFILE, &rl)) return;
    }
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want)
        log_warn(SUB, "descriptor limit %llu is below nfs_max_connections + "
                 "iscsi_max_connections + 1024 = %llu: raise `ulimit -n` or lower the caps",
                 (unsigned long long)rl.rlim_cur, (unsigned long long)want);
}

/* ---------------------------------------------------------------- main */

/* The command line: a configuration file, --foreground, and settings that
 * override the file's (applied after it, in order). */
typedef struct cmdline {
    const char *config_path;
    bool foreground;
    struct { const char *key, *value; } overrides[32];
    size_t nover;
} cmdline_t;

static void parse_command_line(int argc, char **argv, cmdline_t *cl)
{
    enum { OPT_NFS = 256, OPT_MOUNT, OPT_PORTMAP, OPT_ISCSI, OPT_HTTP, OPT_VERSION };
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"state-dir", required_argument, NULL, 'd'},
        {"socket", required_argument, NULL, 's'},
        {"foreground", no_argument, NULL, 'f'},
        {"nfs-listen", required_argument, NULL, OPT_NFS},
        {"mount-listen", required_argument, NULL, OPT_MOUNT},
        {"portmap-listen", required_argument, NULL, OPT_PORTMAP},
        {"iscsi-listen", required_argument, NULL, OPT_ISCSI},
        {"http-listen", required_argument, NULL, OPT_HTTP},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {0},
    };
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":c:d:s:fh", opts, NULL)) != -1) {
        const char *key = NULL;
        switch (c) {
        case 'c': cl->config_path = optarg; break;
        case 'd': key = "state_dir"; break;
        case 's': key = "socket"; break;
        case 'f': cl->foreground = true; break;
        case OPT_NFS: key = "nfs_listen"; break;
        case OPT_MOUNT: key = "mount_listen"; break;
        case OPT_PORTMAP: key = "portmap_listen"; break;
        case OPT_ISCSI: key = "iscsi_listen"; break;
        case OPT_HTTP: key = "http_listen"; break;
        case 'h': usage(stdout); exit(0);
        case OPT_VERSION: printf("cairnd %s\n", CAIRN_VERSION); exit(0);
        case ':': die("option '%s' needs an argument", argv[optind - 1]);
        default: die("unknown option '%s' (see cairnd --help)", argv[optind - 1]);
        }
        if (key) {
            if (cl->nover == CAIRN_ARRAY_SIZE(cl->overrides)) die("too many options");
            cl->overrides[cl->nover].key = key;
            cl->overrides[cl->nover++].value = optarg;
        }
    }
    if (optind < argc) die("unexpected argument '%s'", argv[optind]);
}

/* Defaults, then the file, then the command line; then what no single setting
 * can check. */
static void load_config(const cmdline_t *cl, cairnd_config_t *cfg)
{
    char err[MGMT_PATH_MAX + 512];
    mgmt_config_defaults(cfg);
    /* A packaged install keeps its settings in /etc/cairn; an explicit --config wins. */
    const char *path = cl->config_path;
    if (!path && access(CAIRN_DEFAULT_CONFIG, F_OK) == 0) path = CAIRN_DEFAULT_CONFIG;
    if (path && mgmt_config_load(cfg, path, err, sizeof err)) die("%s", err);
    for (size_t i = 0; i < cl->nover; i++)
        if (mgmt_config_set(cfg, cl->overrides[i].key, cl->overrides[i].value, err, sizeof err))
            die("--%s: %s", cl->overrides[i].key, err);
    if (mgmt_config_check(cfg, err, sizeof err)) die("%s", err);
    cairn_log_set_level((cairn_log_level_t)cfg->log_level);
}

/* The daemon runs in "/", so the state dir and the socket are made absolute
 * (the state dir created) before it gets there. */
static void resolve_paths(cairnd_config_t *cfg)
{
    int rc = make_dirs(cfg->state_dir);
    if (rc) die("cannot create state dir %s: %s", cfg->state_dir, strerror(-rc));
    char abs[PATH_MAX];
    if (!realpath(cfg->state_dir, abs)) die("%s: %s", cfg->state_dir, strerror(errno));
    cairn_strlcpy(cfg->state_dir, abs, sizeof cfg->state_dir);
    if (!cfg->socket[0]) {
        if (strlen(cfg->state_dir) + sizeof "/cairnd.sock" > 108)
            die("state dir path too long for a socket path; give --socket");
        char sock[MGMT_PATH_MAX + 16];
        snprintf(sock, sizeof sock, "%s/cairnd.sock", cfg->state_dir);
        cairn_strlcpy(cfg->socket, sock, sizeof cfg->socket);
    } else if (cfg->socket[0] != '/') {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd)) die("getcwd: %s", strerror(errno));
        char sock[PATH_MAX + MGMT_PATH_MAX + 2];
        snprintf(sock, sizeof sock, "%s/%s", cwd, cfg->socket);
        if (strlen(sock) >= 108) die("socket path too long: %s", sock);
        cairn_strlcpy(cfg->socket, sock, sizeof cfg->socket);
    }
}

/* One daemon per state dir: the lock stays held (its descriptor open) for the
 * process's life and the kernel drops it when we die. */
static void take_instance_lock(const char *state_dir)
{
    char lock_path[MGMT_PATH_MAX + 16];
    snprintf(lock_path, sizeof lock_path, "%s/cairnd.lock", state_dir);
    int lock_fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock_fd < 0) die("cannot open %s: %s", lock_path, strerror(errno));
    if (flock(lock_fd, LOCK_EX | LOCK_NB))
        die("another cairnd is running on state dir %s (%s is locked)", state_dir, lock_path);
}

static void open_logs(const cairnd_config_t *cfg)
{
    if (cfg->log_file[0]) {
        int rc = cairn_log_open_file(cfg->log_file);
        if (rc) die("cannot open log_file %s: %s", cfg->log_file, strerror(-rc));
    }
    if (cfg->log_syslog) cairn_log_enable_syslog("cairnd");
}

/* Signals are taken synchronously by the main loop through the returned
 * signalfd; every thread started from here on inherits the mask. */
static int take_signals(void)
{
    signal(SIGPIPE, SIG_IGN);
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &mask, NULL);
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
    if (sfd < 0) die("signalfd: %s", strerror(errno));
    return sfd;
}

static void log_starting(const cairnd_config_t *cfg)
{
    char nfs[300], mnt[300], pm[300], isc[300];
    mgmt_listen_format(&cfg->nfs, nfs, sizeof nfs);
    mgmt_listen_format(&cfg->mount, mnt, sizeof mnt);
    mgmt_listen_format(&cfg->portmap, pm, sizeof pm);
    mgmt_listen_format(&cfg->iscsi, isc, sizeof isc);
    log_info(SUB, "cairnd %s starting: pid %ld, state dir %s, socket %s", CAIRN_VERSION,
             (long)getpid(), cfg->state_dir, cfg->socket);
    log_debug(SUB, "listen (for later layers): nfs %s mount %s portmap %s iscsi %s", nfs, mnt,
              pm, isc);
}

/* The engine with the configuration's policies, and the pools of the cache. */
static void start_engine(const cairnd_config_t *cfg)
{
    char err[MGMT_PATH_MAX + 512];
    dsl_init(); /* registers the DSL (and the DMU beneath it) with the SPA */
    cairnd_analytics_start(cfg);
    cairn_bufpool_set_huge_pages(cfg->buffer_huge_pages != 0); /* before any chunk */
    cairnd_arc_init(cfg->state_dir, cfg->arc_max);
    spa_fault_set_policy(cfg->fault_errors, cfg->fault_window);
    spa_set_probe_interval(cfg->vdev_probe_interval_ms);
    spa_mmp_set_policy(cfg->mmp_interval_ms, cfg->mmp_fail_intervals);
    vdev_set_device_lock(cfg->device_lock);
    if (cairnd_hostid_init(cfg->state_dir, cfg->hostid, err, sizeof err)) die("%s", err);
    spa_set_scan_throttle(&(spa_scan_throttle_t){cfg->scan_idle_ms, cfg->resilver_delay_ms,
                                                 cfg->scrub_delay_ms});
    dsl_set_defrag_idle_ms(cfg->defrag_idle_ms);
    cairnd_service_status("importing pools");
    if (cairnd_pools_init(cfg->state_dir)) log_warn(SUB, "starting without the pool cache");
    if (cairnd_tokens_init(cfg->state_dir, err, sizeof err))
        log_warn(SUB, "API tokens or users unavailable (HTTPS requests will get 401): %s", err);
    cairnd_pools_import_cached();
}

/* A front end that cannot listen (a taken port, a bad address) stops the
 * start: an appliance that silently serves no NFS or no iSCSI is worse. */
static void start_front_ends(const cairnd_config_t *cfg, int ready_fd)
{
    char err[MGMT_PATH_MAX + 512];
    if (cairnd_iscsi_start(cfg, err, sizeof err) || cairnd_shares_start(cfg, err, sizeof err))
        front_end_failed(ready_fd, err);
    /* The NFS port is bound, but nothing is accepted before every share is back:
     * a client reconnecting after a crash must not find its export missing and
     * take "stale file handle" for an answer. */
    debug_delay_exports();
    cairnd_pools_refresh_shares();
    cairnd_shares_serve();
    if (cairnd_http_start(cfg, err, sizeof err)) front_end_failed(ready_fd, err);
}

/* The foreground parent (daemonize) and the service manager hear that we serve. */
static void tell_ready(int ready_fd)
{
    if (ready_fd >= 0) {
        if (write(ready_fd, "ok", 2) != 2) { /* parent gone: nothing to tell */
        }
        close(ready_fd);
    }
    log_info(SUB, "ready");
    cairnd_service_ready();
}

/* Accepts admin clients until SIGTERM or SIGINT (SIGHUP is ignored). */
static void serve(int lfd, int sfd)
{
    for (;;) {
        struct pollfd pfd[2] = {{.fd = lfd, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
        int polled = poll(pfd, 2, cairnd_service_poll_timeout_ms());
        cairnd_service_watchdog();
        if (polled < 0) {
            if (errno == EINTR) continue;
            log_error(SUB, "poll: %s", strerror(errno));
            return;
        }
        if (pfd[1].revents & POLLIN) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof si) == sizeof si) {
                if (si.ssi_signo == SIGHUP) {
                    log_info(SUB, "SIGHUP ignored (nothing to reload yet)");
                    continue;
                }
                log_info(SUB, "signal %u: shutting down", si.ssi_signo);
                return;
            }
        }
        if (pfd[0].revents & POLLIN) accept_one(lfd);
    }
}

/* Admin requests in flight finished and the front ends stopped first (no new
 * work), then every pool closed cleanly; the cache file stays, so the next
 * start imports the same pools. */
static void shut_down(const cairnd_config_t *cfg, int lfd)
{
    cairnd_service_stopping();
    close(lfd);
    unlink(cfg->socket);
    requests_drain();
    cairnd_http_stop();
    cairnd_iscsi_stop();
    cairnd_shares_stop();
    cairnd_pools_shutdown();
    cairnd_analytics_stop();
    char pid_path[MGMT_PATH_MAX + 16];
    snprintf(pid_path, sizeof pid_path, "%s/cairnd.pid", cfg->state_dir);
    unlink(pid_path);
    log_info(SUB, "stopped");
}

int main(int argc, char **argv)
{
    cmdline_t cl = {0};
    parse_command_line(argc, argv, &cl);
    cairnd_config_t cfg;
    load_config(&cl, &cfg);
    resolve_paths(&cfg);
    take_instance_lock(cfg.state_dir);
    int lfd = open_socket(cfg.socket);
    open_logs(&cfg);

    int ready_fd = -1;
    if (!cl.foreground) {
        char log_path[MGMT_PATH_MAX + 16];
        snprintf(log_path, sizeof log_path, "%s/cairnd.log", cfg.state_dir);
        ready_fd = daemonize(log_path);
    }
    write_pid_file(cfg.state_dir);
    cairn_log_detect_journal();
    cairnd_service_init();
    int sfd = take_signals();
    log_starting(&cfg);
    raise_fd_limit(&cfg);

    start_engine(&cfg);
    start_front_ends(&cfg, ready_fd);
    tell_ready(ready_fd);
    serve(lfd, sfd);
    shut_down(&cfg, lfd);
    return 0;
}

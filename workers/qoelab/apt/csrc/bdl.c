/*
 * apt-bdl: the userspace block-device layer (BDL) of BDL-APT (thesis ch. 2).
 *
 * Design. The program keeps N_MAX sessions open to one storage target, each its own TCP
 * connection (NBD: one libnbd handle each; iSCSI: one libiscsi context and normal session each,
 * session i logging in as IQN-PREFIX:i). An "application" reads the device sequentially in
 * --request sized reads, wrapping at its end. Each request is cut into --stripe sized pieces
 * that are dealt round-robin (one cursor that carries over from request to request) over the
 * *active* sessions 0..K-1 and issued with the libraries' asynchronous calls while the bytes in
 * flight stay below --readahead (the MD read-ahead of the paper). Completed bytes are counted per
 * session when a piece completes, like the paper's endio hook. One single-threaded epoll loop
 * serves every session's socket (in the direction its library asks for), stdin and a report
 * timer; a session's registration changes only when it was serviced or given reads, so open but
 * idle sessions cost nothing per wake-up (APT keeps N_MAX open and few active); read data lands in a fixed pool of buffers (one per in-flight slot, allocated on first
 * use) and is not looked at. Sessions are opened concurrently; the caller learns how many the
 * target accepted.
 *
 * The sessions' protocols (libnbd, libiscsi, the iSCSI login keys) are in session.c.
 *
 * Output protocol (stdout, one JSON object per line, flushed):
 *   {"event":"ready","sessions":N,"size":BYTES,"protocol":"nbd"|"iscsi",
 *    "block_size":B[,"can_multi_conn":true|false]}                   all sessions are open
 *   {"event":"error","session":k,"opened":m,"error":"..."}             opening failed, exit 1
 *       (k: the lowest session that failed or timed out; m: how many sessions did open)
 *   {"event":"report","t":S,"active":K,"inflight":B,"requests":R,"bytes":[b0,...]} every --report-ms
 *       (t: seconds since ready; bytes: cumulative completed bytes per session; R: completed requests)
 *   {"event":"active","active":K}                                      answer to "active K"
 *   {"event":"bad_command","line":"..."}                               unknown stdin line
 *   {"event":"session_lost","session":i,"t":S,"error":"..."}           then a last report, exit 3
 *       (also when a session with reads outstanding completes none for --stall-ms: a silent path
 *        or a hung target, which TCP itself may never report)
 *   {"event":"bye"}                                                    after quit / EOF / SIGTERM, exit 0
 * stdin: "active K" (1 <= K <= N_MAX), "quit"; EOF means quit.
 * Exit codes: 0 quit, 1 sessions could not be opened, 2 bad option (one line on stderr), 3 lost.
 */
#include "bdl.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <sys/epoll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>


volatile sig_atomic_t got_signal;
static void on_signal(int sig) { got_signal = sig; }

int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void json_str(const char *s) {
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

/* A session failed: keep the first cause (libiscsi's messages end in ".\n"). */
void fail(struct session *s, const char *msg) {
    s->st = S_FAILED;
    if (s->err[0]) return;
    snprintf(s->err, sizeof s->err, "%s", msg && *msg ? msg : "unknown error");
    for (size_t n = strlen(s->err); n && (s->err[n - 1] == '\n' || s->err[n - 1] == ' ');) s->err[--n] = 0;
}

/* ---- options ------------------------------------------------------------------------------- */

static _Noreturn void usage_error(const char *opt, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "apt-bdl: %s: ", opt);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(2);
}

static uint64_t parse_num(const char *opt, const char *arg, uint64_t lo, uint64_t hi, uint64_t mult) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(arg, &end, 10);
    if (errno || end == arg || *end || arg[0] == '-' || v < lo || v > hi)
        usage_error(opt, "must be an integer from %" PRIu64 " to %" PRIu64 ", got '%s'", lo, hi, arg);
    if (mult > 1 && v % mult) usage_error(opt, "must be a multiple of %" PRIu64 ", got %llu", mult, v);
    return v;
}

static void parse_options(struct bdl *b, int argc, char **argv) {
    static const struct option longopts[] = {
        {"protocol", required_argument, 0, 'p'},  {"uri", required_argument, 0, 'u'},
        {"sessions", required_argument, 0, 'n'},  {"active", required_argument, 0, 'a'},
        {"stripe", required_argument, 0, 's'},    {"request", required_argument, 0, 'r'},
        {"readahead", required_argument, 0, 'R'}, {"report-ms", required_argument, 0, 'i'},
        {"initiator", required_argument, 0, 'I'}, {"tag", required_argument, 0, 't'},
        {"connect-timeout-ms", required_argument, 0, 'T'}, {"stall-ms", required_argument, 0, 'S'},
        {0, 0, 0, 0},
    };
    const char *protocol = NULL, *active = NULL;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":", longopts, NULL)) != -1) {
        switch (c) {
        case 'p': protocol = optarg; break;
        case 'u': b->uri = optarg; break;
        case 'n': b->n = (int)parse_num("--sessions", optarg, 1, MAX_SESSIONS, 1); break;
        case 'a': active = optarg; break;
        case 's': b->stripe = parse_num("--stripe", optarg, 512, 32 << 20, 512); break;
        case 'r': b->request = parse_num("--request", optarg, 512, 1ULL << 30, 512); break;
        case 'R': b->readahead = parse_num("--readahead", optarg, 512, 4ULL << 30, 1); break;
        case 'i': b->report_ms = (long)parse_num("--report-ms", optarg, 10, 3600000, 1); break;
        case 'T':
            b->connect_timeout_ms = (long)parse_num("--connect-timeout-ms", optarg, 1, 3600000, 1);
            break;
        case 'S': b->stall_ms = (long)parse_num("--stall-ms", optarg, 0, 86400000, 1); break;
        case 'I':
            if (!*optarg || strlen(optarg) > 200) usage_error("--initiator", "must be 1 to 200 characters");
            b->initiator = optarg;
            break;
        case 't': break;
        case ':': usage_error(argv[optind - 1], "needs a value");
        default: usage_error(argv[optind - 1], "unknown option");
        }
    }
    if (optind < argc) usage_error(argv[optind], "unexpected argument");
    if (!protocol) usage_error("--protocol", "required (nbd or iscsi)");
    if (strcmp(protocol, "nbd") && strcmp(protocol, "iscsi"))
        usage_error("--protocol", "must be nbd or iscsi, got '%s'", protocol);
    b->iscsi = !strcmp(protocol, "iscsi");
    if (!b->uri) usage_error("--uri", "required");
    const char *scheme = b->iscsi ? "iscsi://" : "nbd://";
    if (strncmp(b->uri, scheme, strlen(scheme)))
        usage_error("--uri", "must start with %s for --protocol %s, got '%s'", scheme, protocol, b->uri);
    if (!b->n) usage_error("--sessions", "required");
    if (!active) usage_error("--active", "required");
    b->active = (int)parse_num("--active", active, 1, (uint64_t)b->n, 1);
    if (b->readahead < b->stripe)
        usage_error("--readahead", "must be at least the stripe (%" PRIu64 " bytes)", b->stripe);
    if (b->iscsi) {
        struct iscsi_context *tmp = iscsi_create_context(b->initiator);
        if (!tmp) usage_error("--initiator", "libiscsi cannot use it as an initiator name");
        b->url = iscsi_parse_full_url(tmp, b->uri);
        if (!b->url) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", iscsi_get_error(tmp));
            for (char *c = msg; (c = strchr(c, '\n'));) *c = c[1] ? ' ' : 0; /* one line */
            usage_error("--uri", "%s", msg);
        }
    }
}

/* ---- pieces and their completions --------------------------------------------------------- */

void complete(struct piece *p, const char *err) {
    struct bdl *b = p->b;
    struct session *s = p->s;
    struct request *r = p->req;
    s->inflight -= p->len;
    b->inflight -= p->len;
    if (err) {
        if (!b->quitting) fail(s, err);
    } else {
        s->bytes += p->len;
        s->waiting_since = now_ns();
    }
    if (--r->pieces_left == 0 && r->all_issued) {
        if (!err) b->requests_done++;
        r->next_free = b->free_reqs;
        b->free_reqs = r;
    }
    p->next_free = b->free_pieces;
    b->free_pieces = p;
}

/* Bring a session's epoll registration in line with what its library now waits for. */
static void watch(struct bdl *b, struct session *s) {
    int fd = -1, ev = session_events(b, s, &fd);
    if (s->ev >= 0 && (ev < 0 || fd != s->fd)) {
        epoll_ctl(b->epfd, EPOLL_CTL_DEL, s->fd, NULL); /* fails harmlessly if the fd was closed */
        s->ev = -1;
    }
    if (ev < 0 || ev == s->ev) return;
    struct epoll_event e = {.events = (uint32_t)ev, .data.u64 = (uint64_t)s->idx + 1};
    if (epoll_ctl(b->epfd, s->ev < 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd, &e) == 0) {
        s->fd = fd;
        s->ev = ev;
    } else {
        char msg[96];
        snprintf(msg, sizeof msg, "cannot watch the session's socket: %s", strerror(errno));
        fail(s, msg);
    }
}

/* A pipe or socket on stdin is watched; a regular file or /dev/null cannot be (EPERM) and is
   always readable, as poll() would say. */
static void watch_stdin(struct bdl *b, int on) {
    struct epoll_event e = {.events = EPOLLIN, .data.u64 = 0};
    if (epoll_ctl(b->epfd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, 0, on ? &e : NULL) < 0 && on)
        b->stdin_plain = 1;
}

/* Issue pieces while the read-ahead window has room. */
static void issue(struct bdl *b) {
    while (!b->quitting && b->inflight < b->readahead && b->free_pieces) {
        if (!b->cur_req) {
            b->cur_req = b->free_reqs;
            b->free_reqs = b->cur_req->next_free;
            b->cur_req->pieces_left = 0;
            b->cur_req->all_issued = 0;
            b->cur_req_left = b->request;
        }
        uint64_t len = b->stripe;
        if (len > b->cur_req_left) len = b->cur_req_left;
        if (len > b->size - b->offset) len = b->size - b->offset;
        if (b->next_rr >= b->active) b->next_rr = 0;
        struct session *s = &b->ss[b->next_rr++];
        struct piece *p = b->free_pieces;
        if (!p->buf && !(p->buf = malloc(b->buf_size))) {
            fprintf(stderr, "apt-bdl: out of memory\n");
            exit(1);
        }
        b->free_pieces = p->next_free;
        /* accounted before submitting: a completion may not find the counters behind */
        p->s = s;
        p->req = b->cur_req;
        p->len = (uint32_t)len;
        if (s->inflight == 0) s->waiting_since = now_ns();
        s->inflight += len;
        b->inflight += len;
        b->cur_req->pieces_left++;
        uint64_t off = b->offset;
        b->offset = (off + len == b->size) ? 0 : off + len;
        if ((b->cur_req_left -= len) == 0) {
            b->cur_req->all_issued = 1;
            b->cur_req = NULL;
        }
        session_read(b, s, p, off, len);
        watch(b, s);
        if (s->st == S_FAILED) return;
    }
}

/* One wait on every watched socket (and stdin while it is watched); services what is ready.
   Returns 1 when stdin is readable, 0 otherwise, -1 on error. */
static int poll_once(struct bdl *b, int64_t timeout_ns, sigset_t *mask) {
    struct epoll_event evs[64];
    int stdin_ready = b->stdin_plain && b->stdin_open;
    if (timeout_ns < 0 || stdin_ready) timeout_ns = 0;
    struct timespec ts = {timeout_ns / 1000000000, timeout_ns % 1000000000};
    int n = epoll_pwait2(b->epfd, evs, 64, &ts, mask);
    if (n < 0) return errno == EINTR ? 0 : -1;
    for (int k = 0; k < n; k++) {
        if (evs[k].data.u64 == 0) {
            stdin_ready = 1;
            continue;
        }
        struct session *s = &b->ss[evs[k].data.u64 - 1];
        session_service(b, s, (short)evs[k].events);
        watch(b, s);
    }
    return stdin_ready;
}

static void open_sessions(struct bdl *b, sigset_t *mask) {
    int64_t deadline = now_ns() + (int64_t)b->connect_timeout_ms * 1000000;
    for (int i = 0; i < b->n; i++) {
        session_start(b, &b->ss[i]);
        watch(b, &b->ss[i]);
    }
    for (;;) {
        int pending = 0;
        for (int i = 0; i < b->n; i++) {
            struct session *s = &b->ss[i];
            session_check_connect(b, s);
            watch(b, s);
            pending += s->st == S_CONNECTING || s->st == S_CAPACITY;
        }
        if (!pending || got_signal || now_ns() >= deadline) break;
        int64_t left = deadline - now_ns();
        if (poll_once(b, left < 100000000 ? left : 100000000, mask) < 0) break;
    }
    int opened = 0, first_bad = -1;
    for (int i = 0; i < b->n; i++) {
        struct session *s = &b->ss[i];
        if (s->st == S_READY) opened++;
        else if (first_bad < 0) first_bad = i;
    }
    if (got_signal) exit(0);
    if (first_bad < 0) sessions_opened(b);
    if (first_bad < 0 && b->iscsi && (b->stripe % b->block || b->request % b->block)) {
        first_bad = 0;
        snprintf(b->ss[0].err, sizeof b->ss[0].err,
                 "the stripe and the request must be multiples of the LUN's block size %" PRIu32, b->block);
    }
    if (first_bad < 0 && b->size < b->stripe) {
        first_bad = 0;
        snprintf(b->ss[0].err, sizeof b->ss[0].err, "the device (%" PRIu64 " bytes) is smaller than a stripe",
                 b->size);
    }
    if (first_bad >= 0) {
        struct session *s = &b->ss[first_bad];
        if (s->st == S_CONNECTING || s->st == S_CAPACITY)
            snprintf(s->err, sizeof s->err, "no answer within %ld ms", b->connect_timeout_ms);
        printf("{\"event\":\"error\",\"session\":%d,\"opened\":%d,\"error\":", first_bad, opened);
        json_str(s->err);
        printf("}\n");
        fflush(stdout);
        exit(1);
    }
}

/* ---- running ------------------------------------------------------------------------------- */

static void report(struct bdl *b) {
    printf("{\"event\":\"report\",\"t\":%.3f,\"active\":%d,\"inflight\":%" PRIu64 ",\"requests\":%" PRIu64
           ",\"bytes\":[",
           (double)(now_ns() - b->t0) / 1e9, b->active, b->inflight, b->requests_done);
    for (int i = 0; i < b->n; i++) printf(i ? ",%" PRIu64 : "%" PRIu64, b->ss[i].bytes);
    printf("]}\n");
    fflush(stdout);
}

static void start_quit(struct bdl *b) { b->quitting = 1; }

/* Disconnect every session whose reads have all come back; returns how many are still open. */
static int close_idle(struct bdl *b) {
    int open = 0;
    for (int i = 0; i < b->n; i++) {
        struct session *s = &b->ss[i];
        if (s->st == S_READY && s->inflight == 0) {
            /* a disconnect with replies still in flight makes nbdkit 1.32 abort (raw_send_socket) */
            s->st = S_CLOSING;
            if (session_close(b, s))
                s->st = S_CLOSED;
            watch(b, s);
        }
        open += s->st == S_READY || s->st == S_CLOSING;
    }
    return open;
}

static void command(struct bdl *b, char *line) {
    char *end;
    line[strcspn(line, "\r")] = 0;
    if (!strcmp(line, "quit")) return start_quit(b);
    if (!strncmp(line, "active ", 7)) {
        long k = strtol(line + 7, &end, 10);
        if (end != line + 7 && !*end && k >= 1 && k <= b->n) {
            b->active = (int)k;
            printf("{\"event\":\"active\",\"active\":%d}\n", b->active);
            fflush(stdout);
            return;
        }
    }
    printf("{\"event\":\"bad_command\",\"line\":");
    json_str(line);
    printf("}\n");
    fflush(stdout);
}

static void read_stdin(struct bdl *b) {
    ssize_t r = read(0, b->line + b->line_len, sizeof b->line - 1 - b->line_len);
    if (r <= 0) {
        if (r < 0 && errno == EINTR) return;
        b->stdin_open = 0;
        watch_stdin(b, 0);
        if (!b->quitting) start_quit(b);
        return;
    }
    b->line_len += (size_t)r;
    b->line[b->line_len] = 0;
    char *nl;
    while ((nl = memchr(b->line, '\n', b->line_len)) && !b->quitting) {
        *nl = 0;
        command(b, b->line);
        b->line_len -= (size_t)(nl + 1 - b->line);
        memmove(b->line, nl + 1, b->line_len);
    }
    if (b->line_len == sizeof b->line - 1) { /* a line too long for any command */
        b->line[sizeof b->line - 1] = 0;
        command(b, b->line);
        b->line_len = 0;
    }
}

static void lost(struct bdl *b, struct session *s) {
    printf("{\"event\":\"session_lost\",\"session\":%d,\"t\":%.3f,\"error\":", s->idx,
           (double)(now_ns() - b->t0) / 1e9);
    json_str(s->err);
    printf("}\n");
    report(b);
    exit(3);
}

/* A session that owes reads and has completed none for --stall-ms is lost (0: never). */
static void check_stalls(struct bdl *b) {
    if (!b->stall_ms || b->quitting) return;
    int64_t now = now_ns();
    for (int i = 0; i < b->n; i++) {
        struct session *s = &b->ss[i];
        if (s->st == S_READY && s->inflight && now - s->waiting_since > (int64_t)b->stall_ms * 1000000) {
            char msg[160];
            snprintf(msg, sizeof msg, "no read completed for %.1f s with %" PRIu64 " bytes outstanding",
                     (double)(now - s->waiting_since) / 1e9, s->inflight);
            fail(s, msg);
        }
    }
}

static void run(struct bdl *b, sigset_t *mask) {
    int64_t period = (int64_t)b->report_ms * 1000000, quit_deadline = 0;
    b->t0 = now_ns();
    b->next_report = b->t0 + period;
    b->stdin_open = 1;
    watch_stdin(b, 1);
    for (;;) {
        issue(b);
        check_stalls(b);
        for (int i = 0; i < b->n; i++)
            if (b->ss[i].st == S_FAILED) lost(b, &b->ss[i]);
        if (got_signal && !b->quitting) {
            start_quit(b);
            quit_deadline = now_ns(); /* a signal: close at once */
        }
        if (b->quitting) {
            if (b->stdin_open) { /* quitting: stdin is no longer read */
                b->stdin_open = 0;
                watch_stdin(b, 0);
            }
            if (!quit_deadline) quit_deadline = now_ns() + (int64_t)QUIT_DRAIN_MS * 1000000;
            if (now_ns() >= quit_deadline || !close_idle(b)) break;
        }
        int64_t t = now_ns(), wait = b->next_report - t;
        if (b->quitting && quit_deadline - t < wait) wait = quit_deadline - t;
        int r = poll_once(b, wait, mask);
        if (r < 0) {
            perror("apt-bdl: epoll_pwait2");
            exit(1);
        }
        if (r > 0) read_stdin(b);
        if ((t = now_ns()) >= b->next_report) {
            if (!b->quitting) report(b);
            b->next_report += period;
            if (b->next_report <= t) b->next_report = t + period; /* fell behind: no burst of reports */
        }
    }
    for (int i = 0; i < b->n; i++) session_destroy(b, &b->ss[i]);
    printf("{\"event\":\"bye\"}\n");
    fflush(stdout);
}

int main(int argc, char **argv) {
    struct bdl b = {
        .stripe = 131072, .request = 10485760, .readahead = 134217728, .report_ms = 100,
        .connect_timeout_ms = 10000, .initiator = "iqn.2026-11.org.qoelab:apt-bdl",
    };
    parse_options(&b, argc, argv);

    prctl(PR_SET_PDEATHSIG, SIGTERM); /* a parent gone before this still closes our stdin: quit */
    signal(SIGPIPE, SIG_IGN);
    sigset_t block, mask;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigprocmask(SIG_BLOCK, &block, &mask); /* delivered only inside epoll_pwait2: no lost wake-ups */
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    struct rlimit nofile; /* one descriptor per session: use all the hard limit allows */
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
        nofile.rlim_cur = nofile.rlim_max;
        setrlimit(RLIMIT_NOFILE, &nofile);
    }
    b.buf_size = b.stripe < b.request ? b.stripe : b.request;
    /* enough slots for the window even when short pieces (request tails, device end) are in flight */
    size_t npieces = b.readahead / b.buf_size + 2 + 2 * (b.readahead / b.request + 2);
    b.ss = calloc((size_t)b.n, sizeof *b.ss);
    b.pieces = calloc(npieces, sizeof *b.pieces);
    b.reqs = calloc(npieces + 1, sizeof *b.reqs);
    if (!b.ss || !b.pieces || !b.reqs) {
        fprintf(stderr, "apt-bdl: out of memory\n");
        return 1;
    }
    if ((b.epfd = epoll_create1(EPOLL_CLOEXEC)) < 0) {
        perror("apt-bdl: epoll_create1");
        return 1;
    }
    for (size_t i = 0; i < npieces; i++) {
        b.pieces[i] = (struct piece){.b = &b, .next_free = b.free_pieces};
        b.free_pieces = &b.pieces[i];
    }
    for (size_t i = 0; i <= npieces; i++) {
        b.reqs[i].next_free = b.free_reqs;
        b.free_reqs = &b.reqs[i];
    }
    for (int i = 0; i < b.n; i++) b.ss[i] = (struct session){.b = &b, .idx = i, .fd = -1, .ev = -1};

    open_sessions(&b, &mask);
    printf("{\"event\":\"ready\",\"sessions\":%d,\"size\":%" PRIu64 ",\"protocol\":\"%s\"", b.n, b.size,
           b.iscsi ? "iscsi" : "nbd");
    printf(",\"block_size\":%" PRIu32, b.block);
    if (!b.iscsi) printf(",\"can_multi_conn\":%s", b.multi_conn ? "true" : "false");
    printf("}\n");
    fflush(stdout);
    run(&b, &mask);
    return 0;
}

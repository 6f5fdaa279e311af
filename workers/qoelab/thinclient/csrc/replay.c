/* tc-replay: replay thin-client server->client writes open-loop over TCP, and receive them.
 *
 *   tc-replay recv --listen IP:PORT --conns N --out FILE [--timeout S]
 *   tc-replay send --to IP:PORT --schedule FILE --out FILE [--tos-interactive N] [--lead-ms MS]
 *                  [--ports FILE] [--info FILE] [--keystrokes-first]
 *
 * The schedule has one write per line, "conn t_us nbytes kind" (kind 0 interactive, 1 bulk), in
 * time order. The sender opens one connection per conn (TCP_NODELAY: no Nagle, as in paper 002),
 * waits until every connection is up, and at start + t_us puts each write into its connection's
 * queue: writes are open-loop, a full socket buffer delays the bytes (the paper's "server
 * buffering"), never the schedule. Each write carries a 24-byte header (magic, id, the time the
 * application wrote it, its length, its kind), so the receiver reports every write's one-way delay
 * on the host's CLOCK_MONOTONIC, which both network namespaces share. An interactive write goes out
 * with IP_TOS --tos-interactive (a DSCP a priority queue can sort by) set only for the duration of
 * its send(): Linux builds a segment's IP header when it transmits it, so what carries the mark is
 * what left while the interactive write was being sent; bytes held in the socket behind bulk data
 * leave later, unmarked, as part of that bulk (retransmissions too). Both sides write one line per
 * write to --out:
 *   send: conn id kind nbytes app_ns sent_ns off (sent_ns: its last byte accepted by the kernel;
 *         off: the stream offset of its first byte, the 4-byte connection index being 0..3)
 *   recv: conn id kind nbytes app_ns recv_ns    (recv_ns: its last byte read by the application)
 * --ports writes "conn local_port" per connection (to find its packets in a capture); --info writes
 * per connection, after the receiver closed it, "conn key=value ..." from TCP_INFO, including the
 * kernel's RTO counters (total_rto, total_rto_recoveries, total_rto_time_ms) when it has them (6.7+).
 * --keystrokes-first puts an interactive write ahead of the bulk writes still queued in the sender
 * (not yet begun); with tcp_notsent_lowat most of the backlog stays there (experiment E9).
 * Exit status 0 when every connection ended cleanly; errors are one line on stderr.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <linux/tcp.h> /* the kernel's struct tcp_info (glibc's stops at tcpi_total_retrans) */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAGIC 0x51544352u /* "QTCR" */
#define HDR 24
#define MAX_CONNS 1024
#define MAX_WRITE (1 << 20)

struct hdr {
  uint32_t magic, id;
  uint64_t app_ns;
  uint32_t len, kind;
} __attribute__((packed));

static void die(const char *what) {
  fprintf(stderr, "tc-replay: %s: %s\n", what, strerror(errno));
  exit(2);
}

static void fail(const char *msg) {
  fprintf(stderr, "tc-replay: %s\n", msg);
  exit(2);
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void parse_addr(const char *s, struct sockaddr_in *a) {
  char host[64];
  const char *colon = strrchr(s, ':');
  if (!colon || colon - s >= (long)sizeof host) fail("an address must be IP:PORT");
  memcpy(host, s, colon - s);
  host[colon - s] = 0;
  memset(a, 0, sizeof *a);
  a->sin_family = AF_INET;
  a->sin_port = htons((uint16_t)atoi(colon + 1));
  if (inet_pton(AF_INET, host, &a->sin_addr) != 1) fail("an address must be IP:PORT with an IPv4 address");
}

static void nonblocking(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) die("fcntl");
}

/* ---- receiver ---------------------------------------------------------------------------------- */

struct rconn {
  int fd, index, open;
  unsigned char hdr[HDR];
  size_t have;      /* header bytes so far */
  uint64_t left;    /* payload bytes still to skip */
  struct hdr cur;
};

static int run_recv(const char *listen_at, int conns, const char *out_path, int timeout_s) {
  struct sockaddr_in a;
  parse_addr(listen_at, &a);
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  if (ls < 0) die("socket");
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(ls, (struct sockaddr *)&a, sizeof a) < 0) die("bind");
  if (listen(ls, conns) < 0) die("listen");
  printf("listening\n");
  fflush(stdout);
  FILE *out = fopen(out_path, "w");
  if (!out) die(out_path);
  struct rconn *rc = calloc(conns, sizeof *rc);
  int ep = epoll_create1(0);
  for (int i = 0; i < conns; i++) {
    int fd = accept(ls, NULL, NULL);
    if (fd < 0) die("accept");
    uint32_t idx;
    if (recv(fd, &idx, sizeof idx, MSG_WAITALL) != sizeof idx || idx >= (uint32_t)conns)
      fail("a connection did not say which one it is");
    rc[i] = (struct rconn){.fd = fd, .index = (int)idx, .open = 1};
    nonblocking(fd);
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) die("epoll_ctl");
  }
  close(ls);
  int open = conns;
  static unsigned char buf[1 << 16];
  uint64_t deadline = now_ns() + (uint64_t)timeout_s * 1000000000ull;
  while (open > 0) {
    struct epoll_event evs[64];
    int n = epoll_wait(ep, evs, 64, 1000);
    if (n < 0 && errno != EINTR) die("epoll_wait");
    if (timeout_s > 0 && now_ns() > deadline) fail("timed out waiting for the sender to finish");
    for (int e = 0; e < n; e++) {
      struct rconn *c = &rc[evs[e].data.u32];
      for (;;) {
        ssize_t got = read(c->fd, buf, sizeof buf);
        if (got < 0 && (errno == EAGAIN || errno == EINTR)) break;
        if (got < 0) die("read");
        uint64_t t = now_ns();
        if (got == 0) {
          if (c->have || c->left) fail("a connection ended in the middle of a write");
          close(c->fd);
          c->open = 0;
          open--;
          break;
        }
        for (ssize_t off = 0; off < got;) {
          if (c->have < HDR) {
            size_t take = HDR - c->have < (size_t)(got - off) ? HDR - c->have : (size_t)(got - off);
            memcpy(c->hdr + c->have, buf + off, take);
            c->have += take;
            off += (ssize_t)take;
            if (c->have < HDR) break;
            memcpy(&c->cur, c->hdr, HDR);
            if (c->cur.magic != MAGIC || c->cur.len < HDR || c->cur.len > MAX_WRITE)
              fail("the stream is not tc-replay writes (bad header)");
            c->left = c->cur.len - HDR;
          }
          uint64_t take = c->left < (uint64_t)(got - off) ? c->left : (uint64_t)(got - off);
          c->left -= take;
          off += (ssize_t)take;
          if (c->left == 0) {
            fprintf(out, "%d %u %u %u %llu %llu\n", c->index, c->cur.id, c->cur.kind, c->cur.len,
                    (unsigned long long)c->cur.app_ns, (unsigned long long)t);
            c->have = 0;
          }
        }
      }
    }
  }
  if (fclose(out) != 0) die(out_path);
  return 0;
}

/* ---- sender ------------------------------------------------------------------------------------ */

struct item {
  int conn;
  uint64_t t_us;
  uint32_t len, kind;
};

struct qent {
  uint32_t id, kind, len;
  uint64_t app_ns;
  uint32_t sent; /* bytes of this write already sent */
  uint64_t off;  /* stream offset of its first byte */
};

struct sconn {
  int fd, tos;
  struct qent *q;
  size_t head, tail, cap;
  uint64_t queued; /* stream bytes whose sending began, the 4-byte index included */
};

static unsigned char filler[MAX_WRITE];

/* Queue a write. With keystrokes_first an interactive write goes ahead of the bulk writes the
 * application still holds (after the one being sent and other interactive ones): what E9 tests
 * with tcp_notsent_lowat, which keeps the backlog in the application where it can be reordered. */
static void push(struct sconn *c, struct qent e, int keystrokes_first) {
  if (c->tail == c->cap) {
    if (c->head > 0) {
      memmove(c->q, c->q + c->head, (c->tail - c->head) * sizeof *c->q);
      c->tail -= c->head;
      c->head = 0;
    } else {
      c->cap = c->cap ? 2 * c->cap : 64;
      c->q = realloc(c->q, c->cap * sizeof *c->q);
      if (!c->q) fail("out of memory");
    }
  }
  size_t at = c->tail;
  if (keystrokes_first && e.kind == 0) {
    at = c->head;
    while (at < c->tail && (c->q[at].sent > 0 || c->q[at].kind == 0)) at++;
    memmove(c->q + at + 1, c->q + at, (c->tail - at) * sizeof *c->q);
  }
  c->q[at] = e;
  c->tail++;
}

static void settos(struct sconn *c, int tos) {
  if (tos == c->tos) return;
  if (setsockopt(c->fd, IPPROTO_IP, IP_TOS, &tos, sizeof tos) < 0) die("setsockopt IP_TOS");
  c->tos = tos;
}

/* TCP_INFO as "key=value" pairs. The RTO counters (Linux 6.7) sit after tcpi_snd_wnd and are not in
 * older headers, so they are read by offset, and only when the kernel returned that many bytes. */
static void write_info(FILE *f, int conn, int fd) {
  unsigned char raw[512];
  memset(raw, 0, sizeof raw);
  socklen_t len = sizeof raw;
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, raw, &len) < 0) die("getsockopt TCP_INFO");
  struct tcp_info ti;
  memcpy(&ti, raw, sizeof ti);
  fprintf(f, "%d rto_us=%u rtt_us=%u rttvar_us=%u snd_cwnd=%u total_retrans=%u lost=%u retransmits=%u "
          "backoff=%u min_rtt_us=%u bytes_retrans=%llu segs_out=%u dsack_dups=%u reord_seen=%u",
          conn, ti.tcpi_rto, ti.tcpi_rtt, ti.tcpi_rttvar, ti.tcpi_snd_cwnd, ti.tcpi_total_retrans,
          ti.tcpi_lost, ti.tcpi_retransmits, ti.tcpi_backoff, ti.tcpi_min_rtt,
          (unsigned long long)ti.tcpi_bytes_retrans, ti.tcpi_segs_out, ti.tcpi_dsack_dups, ti.tcpi_reord_seen);
  size_t at = offsetof(struct tcp_info, tcpi_snd_wnd) + 4 + 4 + 4; /* + rcv_wnd, rehash */
  if (len >= at + 8) {
    uint16_t rto, rec;
    uint32_t rto_time;
    memcpy(&rto, raw + at, 2);
    memcpy(&rec, raw + at + 2, 2);
    memcpy(&rto_time, raw + at + 4, 4);
    fprintf(f, " total_rto=%u total_rto_recoveries=%u total_rto_time_ms=%u", rto, rec, rto_time);
  }
  fputc('\n', f);
}

/* Send what the socket takes, one write per send(); log each write whose last byte went. */
static void flush(struct sconn *c, int index, int tos_interactive, FILE *out) {
  while (c->head < c->tail) {
    struct qent *e = &c->q[c->head];
    settos(c, e->kind == 0 ? tos_interactive : 0);
    unsigned char hb[HDR];
    struct hdr h = {MAGIC, e->id, e->app_ns, e->len, e->kind};
    memcpy(hb, &h, HDR);
    ssize_t sent;
    if (e->sent < HDR) {
      /* Header and payload in one send when both fit: copy into the filler's front. */
      memcpy(filler, hb, HDR);
      sent = send(c->fd, filler + e->sent, e->len - e->sent, MSG_NOSIGNAL);
      memset(filler, 0x55, HDR);
    } else {
      sent = send(c->fd, filler + e->sent, e->len - e->sent, MSG_NOSIGNAL);
    }
    int err = errno;
    settos(c, 0); /* the mark is for what leaves during this send() only (see the header) */
    if (sent < 0 && (err == EAGAIN || err == EINTR)) return;
    errno = err;
    if (sent < 0) die("send");
    if (e->sent == 0 && sent > 0) { /* its first byte enters the stream now (the order can change) */
      e->off = c->queued;
      c->queued += e->len;
    }
    e->sent += (uint32_t)sent;
    if (e->sent < e->len) return;
    fprintf(out, "%d %u %u %u %llu %llu %llu\n", index, e->id, e->kind, e->len, (unsigned long long)e->app_ns,
            (unsigned long long)now_ns(), (unsigned long long)e->off);
    c->head++;
  }
}

static int run_send(const char *to, const char *schedule, const char *out_path, int tos_interactive, int lead_ms,
                    const char *ports_path, const char *info_path, int keystrokes_first) {
  struct sockaddr_in a;
  parse_addr(to, &a);
  FILE *in = fopen(schedule, "r");
  if (!in) die(schedule);
  size_t n = 0, cap = 4096;
  struct item *items = malloc(cap * sizeof *items);
  int conns = 0;
  char line[256];
  while (fgets(line, sizeof line, in)) {
    int conn;
    unsigned long long t_us;
    unsigned len, kind;
    if (line[0] == '#' || line[0] == '\n') continue;
    if (sscanf(line, "%d %llu %u %u", &conn, &t_us, &len, &kind) != 4 || conn < 0 || conn >= MAX_CONNS ||
        kind > 1 || len > MAX_WRITE)
      fail("the schedule has a line that is not 'conn t_us nbytes kind'");
    if (n && t_us < items[n - 1].t_us) fail("the schedule is not in time order");
    if (n == cap && !(items = realloc(items, (cap *= 2) * sizeof *items))) fail("out of memory");
    items[n++] = (struct item){conn, t_us, len < HDR ? HDR : len, kind};
    if (conn + 1 > conns) conns = conn + 1;
  }
  fclose(in);
  if (!n) fail("the schedule is empty");
  memset(filler, 0x55, sizeof filler);
  struct sconn *sc = calloc(conns, sizeof *sc);
  int ep = epoll_create1(0);
  for (int i = 0; i < conns; i++) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    if (fd < 0) die("socket");
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) die("connect");
    uint32_t idx = (uint32_t)i;
    if (send(fd, &idx, sizeof idx, 0) != sizeof idx) die("send");
    nonblocking(fd);
    sc[i].fd = fd;
    sc[i].queued = sizeof idx;
    struct epoll_event ev = {.events = EPOLLOUT | EPOLLET, .data.u32 = (uint32_t)i};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) die("epoll_ctl");
  }
  if (ports_path) {
    FILE *pf = fopen(ports_path, "w");
    if (!pf) die(ports_path);
    for (int i = 0; i < conns; i++) {
      struct sockaddr_in me;
      socklen_t ml = sizeof me;
      if (getsockname(sc[i].fd, (struct sockaddr *)&me, &ml) < 0) die("getsockname");
      fprintf(pf, "%d %u\n", i, ntohs(me.sin_port));
    }
    if (fclose(pf) != 0) die(ports_path);
  }
  FILE *out = fopen(out_path, "w");
  if (!out) die(out_path);
  uint64_t start = now_ns() + (uint64_t)lead_ms * 1000000ull;
  size_t next = 0;
  while (next < n) {
    uint64_t due = start + items[next].t_us * 1000ull, t = now_ns();
    if (t >= due) {
      struct item *it = &items[next];
      push(&sc[it->conn], (struct qent){(uint32_t)next, it->kind, it->len, t, 0, 0}, keystrokes_first);
      flush(&sc[it->conn], it->conn, tos_interactive, out);
      next++;
      continue;
    }
    /* Until the next write is due: send queued bytes as the sockets take them. */
    uint64_t wait_ns = due - t;
    struct epoll_event evs[64];
    int k = epoll_wait(ep, evs, 64, wait_ns > 2000000 ? (int)(wait_ns / 1000000) - 1 : 0);
    if (k < 0 && errno != EINTR) die("epoll_wait");
    for (int e = 0; e < k; e++) flush(&sc[evs[e].data.u32], (int)evs[e].data.u32, tos_interactive, out);
    if (k <= 0 && wait_ns <= 2000000) {
      struct timespec ts = {(time_t)(due / 1000000000ull), (long)(due % 1000000000ull)};
      clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
    }
  }
  /* Drain every queue, then end each connection and wait for the receiver to close it. */
  for (;;) {
    int pending = 0;
    for (int i = 0; i < conns; i++) {
      flush(&sc[i], i, tos_interactive, out);
      pending += sc[i].head < sc[i].tail;
    }
    if (!pending) break;
    struct epoll_event evs[64];
    if (epoll_wait(ep, evs, 64, 100) < 0 && errno != EINTR) die("epoll_wait");
  }
  FILE *info = info_path ? fopen(info_path, "w") : NULL;
  if (info_path && !info) die(info_path);
  for (int i = 0; i < conns; i++) {
    shutdown(sc[i].fd, SHUT_WR);
    char b;
    int fl = fcntl(sc[i].fd, F_GETFL);
    fcntl(sc[i].fd, F_SETFL, fl & ~O_NONBLOCK);
    while (read(sc[i].fd, &b, 1) > 0) {
    }
    if (info) write_info(info, i, sc[i].fd); /* after the peer's close: every byte was acknowledged */
    close(sc[i].fd);
  }
  if (info && fclose(info) != 0) die(info_path);
  if (fclose(out) != 0) die(out_path);
  return 0;
}

static const char *opt(int argc, char **argv, const char *name, const char *dflt) {
  for (int i = 2; i + 1 < argc; i++)
    if (!strcmp(argv[i], name)) return argv[i + 1];
  return dflt;
}

static int has(int argc, char **argv, const char *name) {
  for (int i = 2; i < argc; i++)
    if (!strcmp(argv[i], name)) return 1;
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) fail("usage: tc-replay recv|send ... (see the source's header)");
  if (!strcmp(argv[1], "recv")) {
    const char *listen_at = opt(argc, argv, "--listen", NULL), *out = opt(argc, argv, "--out", NULL);
    int conns = atoi(opt(argc, argv, "--conns", "0"));
    if (!listen_at || !out || conns < 1 || conns > MAX_CONNS) fail("recv needs --listen, --out and --conns 1..1024");
    return run_recv(listen_at, conns, out, atoi(opt(argc, argv, "--timeout", "0")));
  }
  if (!strcmp(argv[1], "send")) {
    const char *to = opt(argc, argv, "--to", NULL), *sched = opt(argc, argv, "--schedule", NULL),
               *out = opt(argc, argv, "--out", NULL);
    if (!to || !sched || !out) fail("send needs --to, --schedule and --out");
    int tos = (int)strtol(opt(argc, argv, "--tos-interactive", "0"), NULL, 0);
    if (tos < 0 || tos > 255) fail("--tos-interactive must be 0..255");
    return run_send(to, sched, out, tos, atoi(opt(argc, argv, "--lead-ms", "100")), opt(argc, argv, "--ports", NULL),
                    opt(argc, argv, "--info", NULL), has(argc, argv, "--keystrokes-first"));
  }
  fail("the first argument must be recv or send");
  return 2;
}

/* vose-pair: stream fixed-size records over one TCP connection and do, skip or emulate the work of
 * an offload device per record (thesis 000 ch. 3; ../shared/notes/seed-vose.md §5.3 A).
 *
 *   vose-pair recv --addr IP --port P --mode M --device D [--t-ns T] ...   listens, prints JSON lines
 *   vose-pair send --addr IP --port P --mode M --device D --duration S ...
 *   vose-pair calibrate --impl software|hardware --device D --record N    times each piece per record
 *   vose-pair selftest                                                     FIPS-197 on both AES paths
 *
 * Modes: software (every piece in software, SHA-NI masked), hardware (the device's pieces with
 * AES-NI / SHA-NI), vose (the device's pieces skipped on both ends and T busy-waited per record),
 * inf (skipped, no wait). Waits: busy spins on the clock and moves its deadline past interruptions
 * (the device's work would have waited for them), busy_wall keeps a wall-clock deadline (the thesis'
 * loop), sleep sleeps. Both ends agree on mode, device, record and seed in a handshake.
 * Output: one JSON object per line on stdout; errors as one sentence on stderr.
 * Exit codes: 0 ok, 2 usage, 3 integrity, 4 handshake refused, 5 network or system. */
#define _GNU_SOURCE
#include "vose.h"

#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAGIC "QLVOSE1"
#define MASK_SHA_NI ":~0x20000000" /* OPENSSL_ia32cap: word 2 is CPUID(7).EBX; bit 29 = SHA */

enum { EX_USAGE = 2, EX_INTEGRITY = 3, EX_REFUSED = 4, EX_SYS = 5 };

static void die(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("vose-pair: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(code);
}

struct opts {
  const char *cmd, *mode, *device, *addr, *impl, *wait;
  int port, cpu, samples;
  size_t record;
  uint32_t seed;
  double duration, timeout, t_ns, tick;
  long long corrupt;
};

struct hello {
  char magic[8];
  char mode[16], device[16];
  uint32_t record, seed;
};

struct reply {
  uint32_t ok;
  char why[124];
};

static const struct device *dev;
static struct work W;
static uint8_t *pattern;

/* ---- setup ---- */

static void pin(int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set)) die(EX_SYS, "cannot pin to cpu %d: %s", cpu, strerror(errno));
}

/* Which pieces run where, from the mode; 0 or a usage error. */
static void plan(const struct opts *o) {
  W.workload = dev->workload;
  W.record = o->record;
  if (!strcmp(o->mode, "software")) {
    W.sw = dev->workload;
  } else if (!strcmp(o->mode, "hardware")) {
    if (dev->offload & P_CSUM)
      die(EX_USAGE, "device checksum has no accelerated instruction for application records; its hardware "
                    "case is the NIC offload flag (path kernel_csum)");
    if ((dev->offload & P_AES) && !aesni_available()) die(EX_USAGE, "this CPU has no AES-NI");
    W.hw = dev->offload;
    W.sw = dev->workload & ~dev->offload;
  } else if (!strcmp(o->mode, "vose") || !strcmp(o->mode, "inf")) {
    W.sw = dev->workload & ~dev->offload;
  } else {
    die(EX_USAGE, "--mode must be software, hardware, vose or inf, got %s", o->mode);
  }
}

/* SHA-1 in software means OpenSSL without SHA-NI, chosen by OPENSSL_ia32cap before libcrypto
 * starts: set it and run this program again when the environment does not match. */
static void choose_sha1(int masked, char **argv) {
  const char *want = masked ? "masked" : "native", *have = getenv("QOELAB_VOSE_SHA1");
  if (have && !strcmp(have, want)) return;
  if (masked) setenv("OPENSSL_ia32cap", MASK_SHA_NI, 1);
  else unsetenv("OPENSSL_ia32cap");
  setenv("QOELAB_VOSE_SHA1", want, 1);
  execv("/proc/self/exe", argv);
  die(EX_SYS, "cannot re-execute itself: %s", strerror(errno));
}

static double rusage_s(int who, int sys) {
  struct rusage ru;
  getrusage(who, &ru);
  struct timeval tv = sys ? ru.ru_stime : ru.ru_utime;
  return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

static double ns_of(double ticks) { return ticks / TB.ticks_per_ns; }

/* A spin iteration here is one clock read; ten of them, and at least 250 ns, without the loop
 * getting round means something else ran on the core. */
static uint64_t interruption_gap(void) {
  uint64_t t0 = now_ticks(), t1 = t0;
  for (int i = 0; i < 1000; i++) t1 = now_ticks();
  uint64_t ten = (t1 - t0) / 100, floor = (uint64_t)(250 * TB.ticks_per_ns);
  return ten > floor ? ten : floor;
}

/* ---- calibration ---- */

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static void print_stats(const char *side, const char *stage, uint64_t *t, int n) {
  double sum = 0;
  for (int i = 0; i < n; i++) sum += (double)t[i];
  qsort(t, (size_t)n, sizeof *t, cmp_u64);
  double mean = sum / n, med = (double)t[n / 2], p99 = (double)t[(n * 99) / 100], lo = (double)t[0];
  printf("{\"type\":\"stage\",\"side\":\"%s\",\"stage\":\"%s\",\"n\":%d,\"mean_ticks\":%.1f,"
         "\"median_ticks\":%.1f,\"p99_ticks\":%.1f,\"min_ticks\":%.1f,\"mean_ns\":%.2f,\"median_ns\":%.2f,"
         "\"p99_ns\":%.2f,\"min_ns\":%.2f}\n",
         side, stage, n, mean, med, p99, lo, ns_of(mean), ns_of(med), ns_of(p99), ns_of(lo));
}

static void time_stage(const char *stage, unsigned pieces, int hw, int samples) {
  struct work w = W;
  w.sw = hw ? 0 : pieces; /* the chaining XOR is the same instructions either way */
  w.hw = hw ? pieces : 0;
  uint8_t *rec = aligned_alloc(64, (w.record + 63) / 64 * 64);
  uint64_t *ts = calloc((size_t)samples, sizeof *ts), *tr = calloc((size_t)samples, sizeof *tr);
  size_t plen = w.record - TRAILER;
  for (int i = -samples / 10; i < samples; i++) { /* the first tenth warms caches and branch predictors */
    uint64_t seq = (uint64_t)(i + samples);
    stamp(rec, plen, pattern, seq);
    uint64_t t0 = now_ticks();
    work_send(&w, rec, seq);
    uint64_t t1 = now_ticks();
    int bad = work_recv(&w, rec, seq, pattern);
    uint64_t t2 = now_ticks();
    if (bad) die(EX_INTEGRITY, "calibration of %s: the receiver's check failed (%d)", stage, bad);
    if (i >= 0) ts[i] = t1 - t0, tr[i] = t2 - t1;
  }
  print_stats("send", stage, ts, samples);
  print_stats("recv", stage, tr, samples);
  free(rec), free(ts), free(tr);
}

static void calibrate(const struct opts *o) {
  int hw = !strcmp(o->impl, "hardware");
  if (!hw && strcmp(o->impl, "software")) die(EX_USAGE, "--impl must be software or hardware, got %s", o->impl);
  if (hw && !aesni_available()) die(EX_USAGE, "this CPU has no AES-NI: there is no hardware case to time");
  printf("{\"type\":\"calibration\",\"impl\":\"%s\",\"record\":%zu,\"clock\":\"%s\",\"invariant_tsc\":%s,"
         "\"ticks_per_ns\":%.6f,\"sha1\":\"%s\",\"aesni\":%s}\n",
         o->impl, o->record, TB.tsc ? "tsc" : "CLOCK_MONOTONIC_RAW", TB.invariant ? "true" : "false",
         TB.ticks_per_ns, getenv("QOELAB_VOSE_SHA1"), aesni_available() ? "true" : "false");
  time_stage("none", 0, hw, o->samples);
  static const struct { const char *name; unsigned p; } singles[] = {
      {"csum", P_CSUM}, {"sha1", P_SHA1}, {"aes", P_AES}, {"cbc", P_CBC}};
  for (size_t i = 0; i < sizeof singles / sizeof *singles; i++)
    if (!(hw && singles[i].p == P_CSUM)) time_stage(singles[i].name, singles[i].p, hw, o->samples);
  for (const struct device *d = DEVICES; d->name; d++)
    if (!(hw && (d->offload & P_CSUM))) time_stage(d->name, d->offload, hw, o->samples);
  /* The wait's own granularity: ticks per iteration of the spin, and how late each kind returns. */
  uint64_t target = (uint64_t)(10000 * TB.ticks_per_ns), iters = 0, late_busy = 0, late_sleep = 0;
  for (int i = 0; i < 200; i++) {
    uint64_t t0 = now_ticks(), t1;
    uint64_t ignored = 0;
    iters += busy_wait(t0, target, &t1, &ignored);
    late_busy += t1 - t0 - target;
  }
  for (int i = 0; i < 50; i++) {
    uint64_t t0 = now_ticks();
    sleep_wait(target);
    late_sleep += now_ticks() - t0 - target;
  }
  printf("{\"type\":\"wait\",\"ticks_per_iteration\":%.2f,\"ns_per_iteration\":%.3f,\"busy_late_ns\":%.1f,"
         "\"sleep_late_ns\":%.1f,\"target_ns\":10000}\n",
         (double)target * 200 / (double)iters, ns_of((double)target * 200 / (double)iters),
         ns_of((double)late_busy / 200), ns_of((double)late_sleep / 50));
}

/* ---- the stream ---- */

static int full_io(int fd, void *buf, size_t n, int writing) {
  uint8_t *p = buf;
  while (n) {
    ssize_t k = writing ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    p += k, n -= (size_t)k;
  }
  return 0;
}

static void fill_hello(struct hello *h, const struct opts *o) {
  memset(h, 0, sizeof *h);
  memcpy(h->magic, MAGIC, sizeof MAGIC);
  snprintf(h->mode, sizeof h->mode, "%s", o->mode);
  snprintf(h->device, sizeof h->device, "%s", o->device);
  h->record = (uint32_t)o->record;
  h->seed = o->seed;
}

/* Every 64th record's work is timed in place, so the calibration's T can be held against what the
 * same work costs inside the stream (the thesis timed its functions in the running kernel). */
#define WORK_SAMPLE_EVERY 64
#define WORK_SAMPLES_MAX 65536
struct work_timer {
  uint64_t *t;
  int n;
};

static void work_timed(struct work_timer *wt, uint64_t seq, void (*fn)(void *), void *arg) {
  if (seq % WORK_SAMPLE_EVERY || wt->n >= WORK_SAMPLES_MAX) {
    fn(arg);
    return;
  }
  uint64_t t0 = now_ticks();
  fn(arg);
  wt->t[wt->n++] = now_ticks() - t0;
}

static void print_work(struct work_timer *wt) {
  if (!wt->n) return;
  qsort(wt->t, (size_t)wt->n, sizeof *wt->t, cmp_u64);
  double sum = 0;
  for (int i = 0; i < wt->n; i++) sum += (double)wt->t[i];
  printf(",\"work_ns\":{\"n\":%d,\"mean\":%.1f,\"median\":%.1f,\"p99\":%.1f}", wt->n, ns_of(sum / wt->n),
         ns_of((double)wt->t[wt->n / 2]), ns_of((double)wt->t[(wt->n * 99) / 100]));
}

struct send_arg {
  uint8_t *rec;
  uint64_t seq;
};
static void send_fn(void *a) {
  struct send_arg *s = a;
  work_send(&W, s->rec, s->seq);
}
struct recv_arg {
  uint8_t *rec;
  uint64_t seq;
  int bad;
};
static void recv_fn(void *a) {
  struct recv_arg *r = a;
  r->bad = work_recv(&W, r->rec, r->seq, pattern);
}

struct meter {
  uint64_t start, next, tick, records, bytes, waited, waits, spins, stolen;
  const char *role;
};

static void meter_print(struct meter *m, const char *type, uint64_t now) {
  printf("{\"type\":\"%s\",\"role\":\"%s\",\"t\":%.6f,\"records\":%llu,\"bytes\":%llu,\"busy_ns\":%.0f,"
         "\"stolen_ns\":%.0f,\"waits\":%llu,\"utime_s\":%.6f,\"stime_s\":%.6f,\"cpu\":%d",
         type, m->role, ns_of((double)(now - m->start)) / 1e9, (unsigned long long)m->records,
         (unsigned long long)m->bytes, ns_of((double)m->waited), ns_of((double)m->stolen), (unsigned long long)m->waits,
         rusage_s(RUSAGE_THREAD, 0), rusage_s(RUSAGE_THREAD, 1), sched_getcpu());
}

static void meter_maybe(struct meter *m, uint64_t now) {
  if (now < m->next) return;
  meter_print(m, "tick", now);
  puts("}");
  fflush(stdout);
  while (m->next <= now) m->next += m->tick;
}

/* One clock read before and the spin's own last read after: the accounting adds no third read. */
static void emulate(struct meter *m, uint64_t ticks, int sleep) {
  if (!ticks) return;
  uint64_t t0 = now_ticks(), t1;
  if (sleep) {
    sleep_wait(ticks);
    t1 = now_ticks();
  } else {
    m->spins += busy_wait(t0, ticks, &t1, &m->stolen);
  }
  m->waited += t1 - t0;
  m->waits++;
}

static void tcp_summary(int fd) {
  struct tcp_info ti;
  socklen_t len = sizeof ti;
  char cc[32] = "";
  socklen_t cl = sizeof cc;
  getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, &cl);
  memset(&ti, 0, sizeof ti);
  getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len);
  printf(",\"tcp\":{\"cc\":\"%s\",\"rtt_us\":%u,\"retrans\":%u,\"snd_cwnd\":%u,\"mss\":%u}", cc, ti.tcpi_rtt,
         ti.tcpi_total_retrans, ti.tcpi_snd_cwnd, ti.tcpi_snd_mss);
}

static int open_socket(const struct opts *o, struct sockaddr_in *sa) {
  memset(sa, 0, sizeof *sa);
  sa->sin_family = AF_INET;
  sa->sin_port = htons((uint16_t)o->port);
  if (inet_pton(AF_INET, o->addr, &sa->sin_addr) != 1) die(EX_USAGE, "--addr is not an IPv4 address: %s", o->addr);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) die(EX_SYS, "socket: %s", strerror(errno));
  return fd;
}

static void receiver(const struct opts *o) {
  struct sockaddr_in sa;
  int ls = open_socket(o, &sa), one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(ls, (struct sockaddr *)&sa, sizeof sa) || listen(ls, 1))
    die(EX_SYS, "cannot listen on %s:%d: %s", o->addr, o->port, strerror(errno));
  socklen_t sl = sizeof sa;
  getsockname(ls, (struct sockaddr *)&sa, &sl);
  printf("{\"type\":\"listening\",\"port\":%d}\n", ntohs(sa.sin_port));
  fflush(stdout);
  struct pollfd pf = {ls, POLLIN, 0};
  if (poll(&pf, 1, (int)(o->timeout * 1000)) != 1) die(EX_SYS, "no sender connected within %.0f s", o->timeout);
  int fd = accept(ls, NULL, NULL);
  if (fd < 0) die(EX_SYS, "accept: %s", strerror(errno));
  close(ls);
  struct hello mine, theirs;
  struct reply r = {1, ""};
  fill_hello(&mine, o);
  if (full_io(fd, &theirs, sizeof theirs, 0)) die(EX_SYS, "the sender closed before its handshake");
  if (memcmp(theirs.magic, MAGIC, sizeof MAGIC)) snprintf(r.why, sizeof r.why, "the sender is not a vose-pair");
  else if (strncmp(theirs.mode, mine.mode, sizeof mine.mode) || strncmp(theirs.device, mine.device, sizeof mine.device))
    snprintf(r.why, sizeof r.why, "sender runs mode %.15s device %.15s, receiver mode %.15s device %.15s",
             theirs.mode, theirs.device, mine.mode, mine.device);
  else if (theirs.record != mine.record || theirs.seed != mine.seed)
    snprintf(r.why, sizeof r.why, "sender record %u seed %u, receiver record %u seed %u", theirs.record,
             theirs.seed, mine.record, mine.seed);
  r.ok = r.why[0] == 0;
  full_io(fd, &r, sizeof r, 1);
  if (!r.ok) die(EX_REFUSED, "handshake refused: %s", r.why);

  size_t cap = W.record * (65536 / W.record + 2), have = 0;
  uint8_t *buf = aligned_alloc(64, (cap + 63) / 64 * 64);
  uint64_t ticks = (uint64_t)(o->t_ns * TB.ticks_per_ns), seq = 0;
  int sleep = !strcmp(o->wait, "sleep");
  struct work_timer wt = {calloc(WORK_SAMPLES_MAX, sizeof(uint64_t)), 0};
  struct meter m = {0};
  m.role = "recv";
  m.tick = (uint64_t)(o->tick * 1e9 * TB.ticks_per_ns);
  for (;;) {
    ssize_t n = recv(fd, buf + have, cap - have, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) die(EX_SYS, "receive failed: %s", strerror(errno));
    if (n == 0) break;
    if (!m.start) m.start = now_ticks(), m.next = m.start + m.tick; /* goodput counts from the first byte */
    have += (size_t)n;
    size_t off = 0;
    for (; have - off >= W.record; off += W.record, seq++) {
      struct recv_arg ra = {buf + off, seq, 0};
      work_timed(&wt, seq, recv_fn, &ra);
      int bad = ra.bad;
      if (bad)
        die(EX_INTEGRITY, "record %llu failed its %s check: the ends did not do the same work",
            (unsigned long long)seq, bad == P_CSUM ? "checksum" : bad == P_SHA1 ? "ICV (HMAC-SHA1-96)" : "plaintext");
      emulate(&m, ticks, sleep);
      m.records++;
      m.bytes += W.record - TRAILER;
    }
    memmove(buf, buf + off, have - off);
    have -= off;
    meter_maybe(&m, now_ticks());
  }
  if (have) die(EX_INTEGRITY, "the stream ended inside a record (%zu stray bytes)", have);
  meter_print(&m, "summary", m.start ? now_ticks() : 0);
  printf(",\"spins\":%llu,\"t_ns\":%.1f", (unsigned long long)m.spins, o->t_ns);
  print_work(&wt);
  tcp_summary(fd);
  puts("}");
  uint64_t ack = seq;
  full_io(fd, &ack, sizeof ack, 1);
  close(fd);
}

static void sender(const struct opts *o) {
  struct sockaddr_in sa;
  int fd = open_socket(o, &sa), one = 1;
  uint64_t give_up = now_ticks() + (uint64_t)(o->timeout * 1e9 * TB.ticks_per_ns);
  while (connect(fd, (struct sockaddr *)&sa, sizeof sa)) {
    if (errno != ECONNREFUSED || now_ticks() > give_up)
      die(EX_SYS, "cannot connect to %s:%d: %s", o->addr, o->port, strerror(errno));
    close(fd);
    fd = open_socket(o, &sa);
    usleep(20000);
  }
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  struct hello h;
  struct reply r;
  fill_hello(&h, o);
  if (full_io(fd, &h, sizeof h, 1) || full_io(fd, &r, sizeof r, 0))
    die(EX_SYS, "the receiver closed during the handshake");
  if (!r.ok) die(EX_REFUSED, "handshake refused by the receiver: %.*s", (int)sizeof r.why, r.why);

  size_t batch = W.record >= 65536 ? 1 : 65536 / W.record, plen = W.record - TRAILER;
  uint8_t *buf = aligned_alloc(64, (batch * W.record + 63) / 64 * 64);
  uint64_t ticks = (uint64_t)(o->t_ns * TB.ticks_per_ns), seq = 0;
  int sleep = !strcmp(o->wait, "sleep");
  struct work_timer wt = {calloc(WORK_SAMPLES_MAX, sizeof(uint64_t)), 0};
  struct meter m = {0};
  m.role = "send";
  m.start = now_ticks();
  m.tick = (uint64_t)(o->tick * 1e9 * TB.ticks_per_ns);
  m.next = m.start + m.tick;
  uint64_t end = m.start + (uint64_t)(o->duration * 1e9 * TB.ticks_per_ns);
  while (now_ticks() < end) {
    for (size_t j = 0; j < batch; j++, seq++) {
      uint8_t *rec = buf + j * W.record;
      stamp(rec, plen, pattern, seq);
      struct send_arg sa = {rec, seq};
      work_timed(&wt, seq, send_fn, &sa);
      if ((long long)seq == o->corrupt) rec[plen / 2] ^= 0x01; /* a test's deliberate fault */
      emulate(&m, ticks, sleep);
    }
    if (full_io(fd, buf, batch * W.record, 1))
      die(EX_SYS, "the receiver went away after %llu records: %s", (unsigned long long)m.records, strerror(errno));
    m.records += batch;
    m.bytes += batch * plen;
    meter_maybe(&m, now_ticks());
  }
  uint64_t stop = now_ticks(), ack = 0;
  shutdown(fd, SHUT_WR);
  if (full_io(fd, &ack, sizeof ack, 0)) die(EX_INTEGRITY, "the receiver did not confirm the stream (it failed a check)");
  meter_print(&m, "summary", stop);
  printf(",\"spins\":%llu,\"t_ns\":%.1f,\"acked\":%llu", (unsigned long long)m.spins, o->t_ns,
         (unsigned long long)ack);
  print_work(&wt);
  tcp_summary(fd);
  puts("}");
  if (ack != seq) die(EX_INTEGRITY, "the receiver verified %llu records of %llu", (unsigned long long)ack,
                      (unsigned long long)seq);
  close(fd);
}

static void usage(void) {
  fputs("usage: vose-pair send|recv|calibrate|selftest [--mode software|hardware|vose|inf] [--device NAME]\n"
        "  [--record BYTES] [--addr IP] [--port N] [--cpu N] [--t-ns NS] [--wait busy|sleep] [--duration S]\n"
        "  [--timeout S] [--tick S] [--seed N] [--impl software|hardware] [--samples N] [--corrupt SEQ]\n",
        stderr);
  exit(EX_USAGE);
}

int main(int argc, char **argv) {
  struct opts o = {.mode = "software", .device = "sha1_aes_cbc", .addr = "127.0.0.1", .impl = "software",
                   .wait = "busy", .port = 5201, .cpu = -1, .samples = 2000, .record = 1448, .seed = 1,
                   .duration = 10, .timeout = 30, .tick = 1.0, .corrupt = -1};
  if (argc < 2) usage();
  o.cmd = argv[1];
  static const struct option lo[] = {
      {"mode", 1, 0, 'm'}, {"device", 1, 0, 'd'}, {"record", 1, 0, 'r'}, {"addr", 1, 0, 'a'},
      {"port", 1, 0, 'p'}, {"cpu", 1, 0, 'c'}, {"t-ns", 1, 0, 't'}, {"wait", 1, 0, 'w'},
      {"duration", 1, 0, 'D'}, {"timeout", 1, 0, 'T'}, {"tick", 1, 0, 'k'}, {"seed", 1, 0, 's'},
      {"impl", 1, 0, 'i'}, {"samples", 1, 0, 'n'}, {"corrupt", 1, 0, 'x'}, {0, 0, 0, 0}};
  optind = 2;
  for (int ch; (ch = getopt_long(argc, argv, "", lo, NULL)) != -1;) {
    switch (ch) {
      case 'm': o.mode = optarg; break;
      case 'd': o.device = optarg; break;
      case 'r': o.record = strtoul(optarg, NULL, 10); break;
      case 'a': o.addr = optarg; break;
      case 'p': o.port = atoi(optarg); break;
      case 'c': o.cpu = atoi(optarg); break;
      case 't': o.t_ns = atof(optarg); break;
      case 'w': o.wait = optarg; break;
      case 'D': o.duration = atof(optarg); break;
      case 'T': o.timeout = atof(optarg); break;
      case 'k': o.tick = atof(optarg); break;
      case 's': o.seed = (uint32_t)strtoul(optarg, NULL, 10); break;
      case 'i': o.impl = optarg; break;
      case 'n': o.samples = atoi(optarg); break;
      case 'x': o.corrupt = atoll(optarg); break;
      default: usage();
    }
  }
  if (o.record < 256 || o.record > 65536) die(EX_USAGE, "--record must be 256 to 65536 bytes, got %zu", o.record);
  if (o.t_ns < 0 || o.t_ns > 1e9) die(EX_USAGE, "--t-ns must be 0 to 1e9, got %g", o.t_ns);
  if (strcmp(o.wait, "busy") && strcmp(o.wait, "busy_wall") && strcmp(o.wait, "sleep"))
    die(EX_USAGE, "--wait must be busy, busy_wall or sleep, got %s", o.wait);
  if (o.samples < 10) die(EX_USAGE, "--samples must be at least 10, got %d", o.samples);
  if (o.tick <= 0) die(EX_USAGE, "--tick must be positive, got %g", o.tick);
  dev = device_by_name(o.device);
  if (!dev) die(EX_USAGE, "--device must be checksum, sha1_only, aes_only, aes_cbc, sha1_aes or sha1_aes_cbc, got %s", o.device);
  timebase_init();
  prims_init();
  pin(o.cpu);
  pattern = malloc(o.record);
  fill_pattern(pattern, o.record, o.seed);
  if (!strcmp(o.cmd, "selftest")) {
    char why[128];
    if (aes_selftest(why, sizeof why)) die(EX_INTEGRITY, "%s", why);
    printf("{\"type\":\"selftest\",\"ok\":true,\"aesni\":%s,\"clock\":\"%s\",\"ticks_per_ns\":%.6f}\n",
           aesni_available() ? "true" : "false", TB.tsc ? "tsc" : "CLOCK_MONOTONIC_RAW", TB.ticks_per_ns);
    return 0;
  }
  if (!strcmp(o.cmd, "calibrate")) {
    choose_sha1(strcmp(o.impl, "hardware") != 0, argv);
    W.workload = dev->workload;
    W.record = o.record;
    calibrate(&o);
    return 0;
  }
  plan(&o);
  if (!strcmp(o.wait, "busy")) STOLEN_GAP_TICKS = interruption_gap();
  if (o.t_ns > 0 && strcmp(o.mode, "vose"))
    die(EX_USAGE, "--t-ns is the emulated device time of mode vose; mode %s does not wait", o.mode);
  choose_sha1((W.sw & P_SHA1) != 0, argv);
  signal(SIGPIPE, SIG_IGN);
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (!strcmp(o.cmd, "recv")) receiver(&o);
  else if (!strcmp(o.cmd, "send")) sender(&o);
  else usage();
  return 0;
}

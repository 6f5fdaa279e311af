/*
 * linkemu.h: what the parts of linkemu share (see linkemu.c for what the program does and
 * which file holds what): constants, the per-direction types, the small helpers the packet
 * path calls per packet (static inline, so splitting the files costs no calls), and the
 * functions one file calls in another.
 *
 * Include it first in every linkemu*.c file: it defines _GNU_SOURCE (setns, ppoll, M_PI,
 * ...), which must come before any system header.
 */
#ifndef LINKEMU_H
#define LINKEMU_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <linux/virtio_net.h>

#define EXIT_USAGE 2
#define EXIT_PERM 3
#define EXIT_NONS 4
#define EXIT_NOTUN 5
#define EXIT_RUNTIME 6

#define NSEC 1000000000LL
#define READ_BATCH 64
#define WRITE_BATCH 256
#define CHUNK_SLOTS 4096
#define LATE_BUCKETS 10000 /* 1 us buckets, last one collects everything later */
#define DEFAULT_LIMIT_PKTS 1000 /* netem's default limit */
#define DEFAULT_MAX_INFLIGHT 131072
#define SPIN_WINDOW_NS (20 * 1000 * 1000LL)
#define DSCP_EF 46
/* trace=PATH (linkemu_trace.c): bytes of one delivery opportunity (Mahimahi's 1504 counts its
 * TUN packet-information header; these TUN devices carry none, so an MTU-sized IP packet), and
 * the bounds of a trace file (docs/emulation.md). */
#define TRACE_OPP_BYTES 1500
#define TRACE_MAX_LINES 20000000
#define TRACE_MAX_MS 86400000LL
#define OUTAGE_MAX_WINDOWS 100000
/* --offload 1 (linkemu_offload.c): bytes kept at the end of every slot for its meta_t, and the
 * read buffer for a super-packet (64 KB of GSO plus headers). */
#define META_BYTES 32
/* --batch-us applies above this many packets written per second (over a 20 ms window). */
#define BATCH_MIN_PPS 20000LL
#define GBUF_BYTES (65536 + 1024)

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "packet records are written in host order, which must be little-endian"
#endif

/* ------------------------------------------------------------------------- */
/* PRNG: xoshiro256**, seeded through splitmix64 so runs are reproducible.    */

typedef struct {
	uint64_t s[4];
} rng_t;

static inline uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static inline void rng_seed(rng_t *r, uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&seed);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t rng_next(rng_t *r)
{
	uint64_t *s = r->s;
	uint64_t result = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

/* uniform in [0, 1) */
static inline double rng_unit(rng_t *r) { return (rng_next(r) >> 11) * 0x1.0p-53; }

static inline double rng_normal(rng_t *r)
{
	double u1 = rng_unit(r), u2 = rng_unit(r);
	if (u1 < 1e-300)
		u1 = 1e-300;
	return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* ------------------------------------------------------------------------- */
/* Configuration and state per direction.                                    */

enum { DIST_UNIFORM = 0, DIST_NORMAL = 1 };
/* qdisc=: the queue in front of the rate stage.  Q_FIFO is the virtual FIFO (drop-tail, each
 * departure fixed at arrival); the others are real queues served at service time
 * (linkemu_queue.c, "served"), with the drop decisions of linkemu_aqm.c. */
enum { Q_FIFO = 0, Q_DROPHEAD = 1, Q_CODEL = 2, Q_PIE = 3 };

typedef struct {
	double rate_bps; /* 0 = unlimited */
	int64_t delay_ns;
	int64_t jitter_ns;
	int dist;
	int reorder;
	double loss; /* probability 0..1 (Bernoulli) */
	int ge;      /* Gilbert-Elliott enabled */
	double ge_p, ge_r, ge_bad_loss, ge_good_loss; /* probabilities 0..1 */
	long limit_pkts;  /* 0 = none */
	long limit_bytes; /* 0 = none */
	int prio;         /* two-class strict-priority queue instead of the virtual FIFO */
	int qdisc;        /* Q_*: drop-tail FIFO, drop-head, CoDel (RFC 8289) or PIE (RFC 8033) */
	/* CoDel: target and interval; PIE: QDELAY_REF (target), T_UPDATE (interval) and MAX_BURST.
	 * 0 = the RFC's default, filled in by spec_parse. */
	int64_t aqm_target_ns, aqm_interval_ns, aqm_burst_ns;
	/* trace=PATH: delivery opportunities at these ms times (non-decreasing), looping at the last,
	 * instead of rate_bps (linkemu_trace.c) */
	int64_t *trace_ms;
	uint32_t trace_n;
	int64_t trace_period_ms;
	/* outage=ON:OFF (seconds): the rate stage serves only in the "on" part of a periodic schedule
	 * from the direction's time 0, and packets wait through the "off" part (linkemu_trace.c) */
	int64_t on_ns, off_ns;
	/* outages=S:E/S:E/... (seconds): outage windows, once, from the direction's time 0, sorted
	 * and apart; the rate stage serves nothing inside one (linkemu_trace.c) */
	int64_t *win_start, *win_end;
	uint32_t win_n;
} dir_cfg_t;

/* Whether a direction's queue is a real one served at service time (prio, drop-head, the AQMs). */
static inline int is_served(const dir_cfg_t *c) { return c->prio || c->qdisc != Q_FIFO; }

/* Whether a direction has an outage schedule: periodic (outage=) or windows (outages=). */
static inline int has_outage(const dir_cfg_t *c) { return c->off_ns > 0 || c->win_n > 0; }

/* Whether a direction has a rate stage (and so a queue): a constant rate, a trace or an outage. */
static inline int has_rate_stage(const dir_cfg_t *c)
{
	return c->rate_bps > 0 || c->trace_n > 0 || has_outage(c);
}

/* One packet record, written as is (little-endian, 48 bytes; records.py mirrors it).  The
 * explicit padding keeps the layout independent of the compiler. */
enum { CLS_HIGH = 0, CLS_LOW = 1 };
enum {
	FATE_FORWARDED = 0,
	FATE_TAILDROP = 1,
	FATE_LOSS = 2,
	FATE_PUSHED_OUT = 3,
	FATE_OTHER = 4,
	FATE_HEADDROP = 5, /* qdisc=drophead: the oldest waiting packet, to make room */
	FATE_AQM = 6,      /* dropped by CoDel (at dequeue) or PIE (at enqueue) */
};

typedef struct {
	int64_t arrival_ns;
	int64_t start_ns;
	int64_t depart_ns;
	uint32_t backlog_bytes;
	uint16_t ip_len;
	uint16_t payload_len;
	uint32_t seq;
	uint16_t sport, dport;
	uint8_t tcp_flags;
	uint8_t cls;
	uint8_t fate;
	uint8_t pad[5];
} rec_t;
_Static_assert(sizeof(rec_t) == 48, "rec_t must stay 48 bytes: records.py reads it");

/* A packet waiting in the two-class queue; its record is completed when its fate is known. */
typedef struct {
	rec_t r;
	uint32_t slot;
	uint32_t len;
} qent_t;

typedef struct {
	qent_t *q;
	uint32_t head, n, cap;
} ring_t;

typedef struct {
	int64_t depart;
	uint64_t seq;
	uint32_t slot;
	uint32_t len;
} pkt_t;

typedef struct {
	int64_t tx_end;
	uint32_t len;
} txrec_t;

/* --offload 1: what a slot's packet is written with (linkemu_offload.c), kept in the slot's
 * last META_BYTES.  A segment cut from a super-packet has group != 0 and its index in it. */
typedef struct {
	struct virtio_net_hdr vh;
	uint16_t idx, hlen, mss;
	uint32_t group;
} meta_t;
_Static_assert(sizeof(meta_t) <= META_BYTES, "meta_t must fit the slot's tail");

typedef struct {
	const char *name;
	dir_cfg_t cfg;
	int in_fd, out_fd;
	rng_t rng;
	int ge_bad;
	/* slot pool: fixed size buffers in chunks, never freed while running */
	unsigned char **chunks;
	uint32_t nchunks, nslots, max_slots;
	uint32_t *freelist;
	uint32_t nfree;
	/* delay line: min-heap on (depart, seq) */
	pkt_t *heap;
	uint32_t heap_n;
	uint64_t seq;
	int64_t last_depart;
	/* rate stage: FIFO of transmissions not yet finished (the queue) */
	txrec_t *txq;
	uint32_t txq_head, txq_n;
	uint64_t txq_bytes;
	int64_t last_tx_end;
	/* trace: the next opportunity (absolute index across loops), the bytes it has left, time 0 */
	uint64_t tr_k;
	uint32_t tr_left;
	int64_t tr_t0;
	/* prio=1: the real queue.  wait_* cover both rings, svc_len the packet being serialised
	 * until busy_until (counted in the limit until then). */
	ring_t ring[2]; /* indexed by CLS_HIGH / CLS_LOW */
	uint64_t wait_bytes, wait_cls_bytes[2];
	int64_t busy_until;
	uint32_t svc_len;
	uint64_t pushed_out, queue_drops_high, rx_cls[2], served_cls[2];
	/* qdisc=codel (RFC 8289's state variables) */
	int64_t cd_first_above, cd_drop_next;
	uint32_t cd_count, cd_lastcount;
	int cd_dropping;
	/* qdisc=pie (RFC 8033's): the probability, the latency now and at the last update, the
	 * next update's time and the burst allowance left */
	double pie_p;
	int64_t pie_qdelay, pie_qdelay_old, pie_next_update, pie_burst_left;
	uint64_t head_drops, aqm_drops;
	/* --offload 1: the read buffer, the last super-packet's number, super-packets read and
	 * written */
	unsigned char *gbuf;
	uint32_t gso_group;
	uint64_t rx_super, tx_super;
	/* --records-*: NULL when off, so the packet path pays one pointer test */
	FILE *rec;
	uint64_t records;
	/* counters */
	uint64_t rx_pkts, rx_bytes, tx_pkts, tx_bytes;
	uint64_t loss_drops, queue_drops, overflow_drops, tx_errors, oversize_drops;
	uint64_t max_backlog_pkts, max_backlog_bytes;
	uint32_t *late_hist;
	int64_t late_max;
} dir_t;

/* Size of one slot (MTU + headroom, cache-line aligned) and the MTU; set once in main before
 * any packet. */
extern size_t g_slot_size;
extern uint32_t g_mtu;
/* --offload: virtio-net headers and TSO on both TUN devices (linkemu_offload.c). */
extern int g_offload;
/* Set by the signal handler (linkemu_setup.c), read by the event loop in main. */
extern volatile sig_atomic_t g_stop, g_dump;
/* Failed record writes, over both directions. */
extern uint64_t rec_errors;

/* ------------------------------------------------------------------------- */
/* Per packet helpers.                                                        */

static inline int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * NSEC + ts.tv_nsec;
}

/* A slot's buffer (the pool itself is in linkemu_queue.c). */
static inline unsigned char *slot_ptr(dir_t *d, uint32_t slot)
{
	return d->chunks[slot / CHUNK_SLOTS] + (size_t)(slot % CHUNK_SLOTS) * g_slot_size;
}

/* The packet room of a slot, and its meta_t (after the packet room). */
static inline uint32_t slot_room(void) { return (uint32_t)(g_slot_size - META_BYTES); }
static inline meta_t *slot_meta(unsigned char *slot) { return (meta_t *)(slot + g_slot_size - META_BYTES); }

/* ------------------------------------------------------------------------- */
/* linkemu_setup.c                                                            */

/* The options other than the two SPECs, which go straight into the directions' dir_cfg_t. */
typedef struct {
	const char *cns, *sns, *cif, *sif;
	const char *uprec, *downrec;
	int mtu;
	uint64_t seed;
	int rt_prio;
	int64_t spin_ns, batch_ns;
	uint32_t max_inflight;
	int offload;
} opts_t;

__attribute__((noreturn, format(printf, 2, 3))) void die(int code, const char *fmt, ...);
void *xcalloc(size_t n, size_t sz);
void print_stats(dir_t *up, dir_t *down, const char *event);
void install_signals(sigset_t *waitmask);
int open_tun_in_ns(const char *ns, const char *ifname, int mtu, int offload, int home_fd);
void parse_args(int argc, char **argv, opts_t *o, dir_cfg_t *up, dir_cfg_t *down);
FILE *open_records(const char *path);
void dir_init(dir_t *d, const char *name, uint32_t max_slots, uint64_t seed);
int spec_parse(dir_cfg_t *c, const char *which, char *spec, char *err, size_t errlen);
void control_line(dir_t *up, dir_t *down, char *line);

/* ------------------------------------------------------------------------- */
/* linkemu_queue.c                                                            */

int64_t served_next_start(dir_t *d);
void served_service(dir_t *d, int64_t now);
void served_drop(dir_t *d, qent_t *e, int fate);
qent_t served_pop(dir_t *d, int ring);
void read_side(dir_t *d);
int send_due(dir_t *d, int64_t t);
int slot_alloc(dir_t *d, uint32_t *out);
pkt_t heap_pop(dir_t *d);
void on_arrival(dir_t *d, uint32_t slot, uint32_t len, int64_t t);
void record_other(dir_t *d, const unsigned char *p, uint32_t len, int64_t t);
void dropped_unqueued(dir_t *d, const unsigned char *p, uint32_t len, int64_t t, uint64_t *counter);
void sent(dir_t *d, const pkt_t *p, int64_t now, int ok);

/* ------------------------------------------------------------------------- */
/* linkemu_offload.c                                                          */

void offload_read_side(dir_t *d);
int offload_send(dir_t *d, int64_t t);

/* ------------------------------------------------------------------------- */
/* linkemu_trace.c                                                            */

int trace_load(dir_cfg_t *c, const char *path, char *err, size_t errlen);
int outage_windows_parse(dir_cfg_t *c, const char *spec, char *err, size_t errlen);
void trace_start(dir_t *d, int64_t t0);
int64_t trace_tx_end(dir_t *d, int64_t start, uint32_t len);
int64_t outage_tx_end(const dir_t *d, int64_t start, int64_t need_ns);

/* ------------------------------------------------------------------------- */
/* linkemu_aqm.c                                                              */

void aqm_defaults(dir_cfg_t *c);
void aqm_start(dir_t *d, int64_t t0);
int codel_take(dir_t *d, int64_t now, qent_t *out);
int pie_drop_early(dir_t *d, int64_t t, uint64_t qbytes);
void pie_dequeued(dir_t *d, int64_t sojourn, int empty);
void pie_catch_up(dir_t *d, int64_t t);

#endif

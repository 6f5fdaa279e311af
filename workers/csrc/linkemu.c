/*
 * linkemu: the packet path of qoelab's `userspace` link emulator.
 *
 * It creates one TUN device in a client network namespace and one in a server
 * namespace and forwards IP packets between them, applying per direction a
 * serialisation rate with a bounded drop-tail queue, a one-way delay, jitter,
 * and random (Bernoulli) or Gilbert-Elliott loss.  Packets are forwarded, not
 * proxied: the endpoints' own TCP sees the emulated path, as with netem.
 *
 * One thread serves both directions.  Each accepted packet gets its departure
 * time at arrival (rate stage, then delay + jitter); packets wait in a per
 * direction min-heap keyed by departure time and are written when due.  The
 * thread sleeps in ppoll() with nanosecond timeouts (timer slack set to 1 ns)
 * and spins for the last 200 us before a deadline, because hrtimer wake-up
 * latency in a VM is 50-100 us; when spinning would take more than a quarter
 * of the time (high packet rates) it sleeps to the deadline instead.
 *
 * With `prio=1` a direction's rate stage is instead a real two-class queue (two FIFOs and a
 * "busy until" time) served at service time: DSCP EF packets first, non-preemptive, one shared
 * packet/byte limit, and a high packet pushes low ones out of the tail when the buffer is full.
 * The FIFO path (prio=0) is untouched by it.  `--records-up/--records-down PATH` write one
 * 48-byte record per packet (rec_t below; docs/emulation.md has the table).
 *
 * Protocol with the driver: prints `ready` on stdout once both devices exist;
 * SIGUSR1 prints one JSON stats line; SIGTERM/SIGINT, the end of stdin (when
 * stdin is a pipe) or the parent's death make it print the final stats line
 * and exit 0.  The TUN devices are not persistent, so they disappear with the
 * process however it ends.
 *
 * Exit codes: 0 ok, 2 usage, 3 permission (CAP_NET_ADMIN), 4 namespace not
 * found, 5 TUN unavailable, 6 other runtime error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "packet records are written in host order, which must be little-endian"
#endif

/* ------------------------------------------------------------------------- */
/* PRNG: xoshiro256**, seeded through splitmix64 so runs are reproducible.    */

typedef struct {
	uint64_t s[4];
} rng_t;

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void rng_seed(rng_t *r, uint64_t seed)
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

static double rng_normal(rng_t *r)
{
	double u1 = rng_unit(r), u2 = rng_unit(r);
	if (u1 < 1e-300)
		u1 = 1e-300;
	return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* ------------------------------------------------------------------------- */
/* Configuration and state per direction.                                    */

enum { DIST_UNIFORM = 0, DIST_NORMAL = 1 };

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
} dir_cfg_t;

/* One packet record, written as is (little-endian, 48 bytes; records.py mirrors it).  The
 * explicit padding keeps the layout independent of the compiler. */
enum { CLS_HIGH = 0, CLS_LOW = 1 };
enum { FATE_FORWARDED = 0, FATE_TAILDROP = 1, FATE_LOSS = 2, FATE_PUSHED_OUT = 3, FATE_OTHER = 4 };

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
	/* prio=1: the real queue.  wait_* cover both rings, svc_len the packet being serialised
	 * until busy_until (counted in the limit until then). */
	ring_t ring[2]; /* indexed by CLS_HIGH / CLS_LOW */
	uint64_t wait_bytes, wait_cls_bytes[2];
	int64_t busy_until;
	uint32_t svc_len;
	uint64_t pushed_out, queue_drops_high, rx_cls[2], served_cls[2];
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

static size_t g_slot_size;
static volatile sig_atomic_t g_stop, g_dump;

static void die(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("linkemu: error: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(code);
}

static inline int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * NSEC + ts.tv_nsec;
}

static void *xcalloc(size_t n, size_t sz)
{
	void *p = calloc(n, sz);
	if (!p)
		die(EXIT_RUNTIME, "out of memory");
	return p;
}

/* ------------------------------------------------------------------------- */
/* Slot pool.                                                                */

static inline unsigned char *slot_ptr(dir_t *d, uint32_t slot)
{
	return d->chunks[slot / CHUNK_SLOTS] + (size_t)(slot % CHUNK_SLOTS) * g_slot_size;
}

static int slot_alloc(dir_t *d, uint32_t *out)
{
	if (d->nfree == 0) {
		if (d->nslots >= d->max_slots)
			return -1;
		unsigned char *c = malloc((size_t)CHUNK_SLOTS * g_slot_size);
		if (!c)
			return -1;
		d->chunks[d->nchunks++] = c;
		for (uint32_t i = 0; i < CHUNK_SLOTS; i++)
			d->freelist[d->nfree++] = d->nslots + CHUNK_SLOTS - 1 - i;
		d->nslots += CHUNK_SLOTS;
	}
	*out = d->freelist[--d->nfree];
	return 0;
}

static inline void slot_free(dir_t *d, uint32_t slot) { d->freelist[d->nfree++] = slot; }

/* ------------------------------------------------------------------------- */
/* Heap.                                                                     */

static inline int pkt_less(const pkt_t *a, const pkt_t *b)
{
	return a->depart < b->depart || (a->depart == b->depart && a->seq < b->seq);
}

static void heap_push(dir_t *d, pkt_t p)
{
	uint32_t i = d->heap_n++;
	while (i > 0) {
		uint32_t parent = (i - 1) / 2;
		if (!pkt_less(&p, &d->heap[parent]))
			break;
		d->heap[i] = d->heap[parent];
		i = parent;
	}
	d->heap[i] = p;
}

static pkt_t heap_pop(dir_t *d)
{
	pkt_t top = d->heap[0];
	pkt_t last = d->heap[--d->heap_n];
	uint32_t i = 0, n = d->heap_n;
	for (;;) {
		uint32_t l = 2 * i + 1, r = l + 1, m = i;
		const pkt_t *best = &last;
		if (l < n && pkt_less(&d->heap[l], best)) {
			m = l;
			best = &d->heap[l];
		}
		if (r < n && pkt_less(&d->heap[r], best))
			m = r;
		if (m == i)
			break;
		d->heap[i] = d->heap[m];
		i = m;
	}
	if (n > 0)
		d->heap[i] = last;
	return top;
}

/* ------------------------------------------------------------------------- */
/* Per packet decisions.                                                     */

static int lose_packet(dir_t *d)
{
	dir_cfg_t *c = &d->cfg;
	if (c->ge) {
		/* As netem's gemodel: the loss draw uses the state the packet finds,
		 * then the chain steps. */
		int lost;
		if (d->ge_bad) {
			lost = rng_unit(&d->rng) < c->ge_bad_loss;
			if (rng_unit(&d->rng) < c->ge_r)
				d->ge_bad = 0;
		} else {
			lost = rng_unit(&d->rng) < c->ge_good_loss;
			if (rng_unit(&d->rng) < c->ge_p)
				d->ge_bad = 1;
		}
		return lost;
	}
	return c->loss > 0 && rng_unit(&d->rng) < c->loss;
}

static int64_t draw_jitter(dir_t *d)
{
	dir_cfg_t *c = &d->cfg;
	if (c->jitter_ns <= 0)
		return 0;
	if (c->dist == DIST_NORMAL)
		return (int64_t)llround(rng_normal(&d->rng) * (double)c->jitter_ns);
	return (int64_t)llround((2.0 * rng_unit(&d->rng) - 1.0) * (double)c->jitter_ns);
}

/* Classify a packet and fill the header fields of its record.  Everything is bounds-checked:
 * a TUN device delivers whatever the namespace's stack sends, including truncated packets. */
static void parse_packet(const unsigned char *p, uint32_t len, int64_t t, rec_t *r)
{
	memset(r, 0, sizeof *r);
	r->arrival_ns = t;
	r->start_ns = r->depart_ns = -1;
	r->ip_len = len > UINT16_MAX ? UINT16_MAX : (uint16_t)len;
	r->cls = CLS_LOW;
	if (len < 1)
		return;
	uint32_t hl, plen;
	int proto;
	if (p[0] >> 4 == 4) {
		if (len < 20)
			return;
		if (p[1] >> 2 == DSCP_EF)
			r->cls = CLS_HIGH;
		hl = (uint32_t)(p[0] & 0x0f) * 4;
		uint32_t tot = (uint32_t)p[2] << 8 | p[3];
		if (hl < 20 || hl > len || tot < hl)
			return;
		/* A fragment (MF set or an offset) carries no whole TCP segment: payload stays 0. */
		if ((((uint32_t)p[6] << 8 | p[7]) & 0x3fff) != 0)
			return;
		proto = p[9];
		plen = (tot < len ? tot : len) - hl;
	} else if (p[0] >> 4 == 6) {
		if (len < 40)
			return;
		if ((((p[0] & 0x0f) << 4 | p[1] >> 4) >> 2) == DSCP_EF)
			r->cls = CLS_HIGH;
		hl = 40;
		proto = p[6]; /* extension headers are not followed: such packets count as non-TCP */
		uint32_t pl = (uint32_t)p[4] << 8 | p[5];
		plen = pl < len - 40 ? pl : len - 40;
	} else {
		return;
	}
	if (proto != IPPROTO_TCP && proto != IPPROTO_UDP)
		return;
	if (plen < (proto == IPPROTO_TCP ? 20u : 8u))
		return;
	const unsigned char *th = p + hl;
	/* Ports for UDP too: they are what tells flows apart in a record file. */
	r->sport = (uint16_t)(th[0] << 8 | th[1]);
	r->dport = (uint16_t)(th[2] << 8 | th[3]);
	if (proto != IPPROTO_TCP)
		return;
	r->seq = (uint32_t)th[4] << 24 | (uint32_t)th[5] << 16 | (uint32_t)th[6] << 8 | th[7];
	r->tcp_flags = th[13];
	uint32_t doff = (uint32_t)(th[12] >> 4) * 4;
	if (doff >= 20 && doff <= plen)
		r->payload_len = (uint16_t)(plen - doff);
}

static uint64_t rec_errors;

static void rec_write(dir_t *d, const rec_t *r)
{
	if (fwrite(r, sizeof *r, 1, d->rec) != 1)
		rec_errors++;
	d->records++;
}

static inline uint32_t clamp_u32(uint64_t x) { return x > UINT32_MAX ? UINT32_MAX : (uint32_t)x; }

/* The FIFO queue at time t (only for records: on_arrival retires inline, as it always did). */
static uint64_t fifo_backlog(dir_t *d, int64_t t)
{
	while (d->txq_n > 0 && d->txq[d->txq_head].tx_end <= t) {
		d->txq_bytes -= d->txq[d->txq_head].len;
		d->txq_head = (d->txq_head + 1) % d->max_slots;
		d->txq_n--;
	}
	return d->txq_bytes;
}

/* ---- prio=1: two FIFOs served at service time ---------------------------------------- */

static inline qent_t *ring_at(ring_t *q, uint32_t i) { return &q->q[(q->head + i) % q->cap]; }

static inline void ring_push(ring_t *q, const qent_t *e)
{
	*ring_at(q, q->n) = *e;
	q->n++;
}

static inline qent_t ring_pop_head(ring_t *q)
{
	qent_t e = q->q[q->head];
	q->head = (q->head + 1) % q->cap;
	q->n--;
	return e;
}

static inline qent_t ring_pop_tail(ring_t *q)
{
	q->n--;
	return *ring_at(q, q->n);
}

/* When the next packet can start serialisation: after the one in service, and not before the
 * earliest waiting packet arrived.  INT64_MAX when nothing waits. */
static int64_t prio_next_start(dir_t *d)
{
	ring_t *hi = &d->ring[CLS_HIGH], *lo = &d->ring[CLS_LOW];
	int64_t a = INT64_MAX;
	if (hi->n)
		a = hi->q[hi->head].r.arrival_ns;
	if (lo->n && lo->q[lo->head].r.arrival_ns < a)
		a = lo->q[lo->head].r.arrival_ns;
	if (a == INT64_MAX)
		return a;
	return a > d->busy_until ? a : d->busy_until;
}

/* Start every service whose start time s is before `now`.  Strictly before: a packet read at
 * `now` may be high priority and must be able to win a service starting at `now`.  Starts use
 * the virtual time s, not the (slightly later) time of the decision, so the rate stays exact. */
static void prio_service(dir_t *d, int64_t now)
{
	dir_cfg_t *c = &d->cfg;
	for (;;) {
		int64_t s = prio_next_start(d);
		if (s >= now)
			return;
		ring_t *hi = &d->ring[CLS_HIGH];
		ring_t *q = hi->n && hi->q[hi->head].r.arrival_ns <= s ? hi : &d->ring[CLS_LOW];
		qent_t e = ring_pop_head(q);
		d->wait_bytes -= e.len;
		d->wait_cls_bytes[e.r.cls] -= e.len;
		int64_t tx_end = s + (int64_t)llround((double)e.len * 8.0 * 1e9 / c->rate_bps);
		d->busy_until = tx_end;
		d->svc_len = e.len;
		d->served_cls[e.r.cls]++;

		/* The delay line, with the same in-order rule as the FIFO path. */
		int64_t depart = tx_end + c->delay_ns + draw_jitter(d);
		if (depart < tx_end)
			depart = tx_end;
		if (!c->reorder && depart < d->last_depart)
			depart = d->last_depart;
		d->last_depart = depart > d->last_depart ? depart : d->last_depart;
		pkt_t p = {.depart = depart, .seq = d->seq++, .slot = e.slot, .len = e.len};
		heap_push(d, p);
		if (d->rec) {
			e.r.start_ns = s;
			e.r.depart_ns = depart;
			e.r.fate = FATE_FORWARDED;
			rec_write(d, &e.r);
		}
	}
}

static inline int fits(const dir_cfg_t *c, uint64_t pkts, uint64_t bytes, uint32_t len)
{
	return !(c->limit_pkts > 0 && pkts >= (uint64_t)c->limit_pkts) &&
	       !(c->limit_bytes > 0 && bytes + len > (uint64_t)c->limit_bytes);
}

static void prio_drop(dir_t *d, qent_t *e, int fate)
{
	if (d->rec) {
		e->r.fate = (uint8_t)fate;
		rec_write(d, &e->r);
	}
	slot_free(d, e->slot);
}

static void prio_arrival(dir_t *d, uint32_t slot, uint32_t len, int64_t t)
{
	dir_cfg_t *c = &d->cfg;
	qent_t e = {.slot = slot, .len = len};
	parse_packet(slot_ptr(d, slot), len, t, &e.r);
	d->rx_pkts++;
	d->rx_bytes += len;
	d->rx_cls[e.r.cls]++;

	/* Start what should have started before this packet came, so it sees the queue as of t. */
	prio_service(d, t);
	int busy = d->busy_until > t;
	ring_t *lo = &d->ring[CLS_LOW];
	uint64_t qpkts = d->ring[CLS_HIGH].n + lo->n + (uint64_t)busy;
	uint64_t qbytes = d->wait_bytes + (busy ? d->svc_len : 0);
	e.r.backlog_bytes = clamp_u32(qbytes);

	if (lose_packet(d)) {
		d->loss_drops++;
		prio_drop(d, &e, FATE_LOSS);
		return;
	}
	if (!fits(c, qpkts, qbytes, len) && e.r.cls == CLS_HIGH) {
		/* Push out low packets from the tail (never the one in service), but only when that
		 * makes room: destroying low packets and then dropping the high one helps nobody. */
		if (fits(c, qpkts - lo->n, qbytes - d->wait_cls_bytes[CLS_LOW], len)) {
			while (!fits(c, qpkts, qbytes, len)) {
				qent_t v = ring_pop_tail(lo);
				qpkts--;
				qbytes -= v.len;
				d->wait_bytes -= v.len;
				d->wait_cls_bytes[CLS_LOW] -= v.len;
				d->pushed_out++;
				prio_drop(d, &v, FATE_PUSHED_OUT);
			}
		}
	}
	if (!fits(c, qpkts, qbytes, len)) {
		d->queue_drops++;
		if (e.r.cls == CLS_HIGH)
			d->queue_drops_high++;
		prio_drop(d, &e, FATE_TAILDROP);
		return;
	}
	ring_push(&d->ring[e.r.cls], &e);
	d->wait_bytes += len;
	d->wait_cls_bytes[e.r.cls] += len;
	if (qpkts + 1 > d->max_backlog_pkts)
		d->max_backlog_pkts = qpkts + 1;
	if (qbytes + len > d->max_backlog_bytes)
		d->max_backlog_bytes = qbytes + len;
}

/* Decide the fate of a packet that was just read into `slot`. */
static void on_arrival(dir_t *d, uint32_t slot, uint32_t len, int64_t t)
{
	dir_cfg_t *c = &d->cfg;
	if (c->prio) {
		prio_arrival(d, slot, len, t);
		return;
	}
	/* Records only: the FIFO decisions below are the calibrated ones and do not read `r`. */
	rec_t r;
	if (d->rec) {
		parse_packet(slot_ptr(d, slot), len, t, &r);
		r.backlog_bytes = c->rate_bps > 0 ? clamp_u32(fifo_backlog(d, t)) : 0;
		d->rx_cls[r.cls]++;
	}
	d->rx_pkts++;
	d->rx_bytes += len;

	if (lose_packet(d)) {
		d->loss_drops++;
		if (d->rec) {
			r.fate = FATE_LOSS;
			rec_write(d, &r);
		}
		slot_free(d, slot);
		return;
	}

	int64_t tx_end = t;
	if (c->rate_bps > 0) {
		/* Retire transmissions that have finished: what remains is the queue. */
		while (d->txq_n > 0 && d->txq[d->txq_head].tx_end <= t) {
			d->txq_bytes -= d->txq[d->txq_head].len;
			d->txq_head = (d->txq_head + 1) % d->max_slots;
			d->txq_n--;
		}
		if ((c->limit_pkts > 0 && d->txq_n >= (uint64_t)c->limit_pkts) ||
		    (c->limit_bytes > 0 && d->txq_bytes + len > (uint64_t)c->limit_bytes)) {
			d->queue_drops++;
			if (d->rec) {
				r.fate = FATE_TAILDROP;
				rec_write(d, &r);
			}
			slot_free(d, slot);
			return;
		}
		int64_t start = t > d->last_tx_end ? t : d->last_tx_end;
		if (d->rec)
			r.start_ns = start;
		tx_end = start + (int64_t)llround((double)len * 8.0 * 1e9 / c->rate_bps);
		d->last_tx_end = tx_end;
		uint32_t tail = (d->txq_head + d->txq_n) % d->max_slots;
		d->txq[tail].tx_end = tx_end;
		d->txq[tail].len = len;
		d->txq_n++;
		d->txq_bytes += len;
		if (d->txq_n > d->max_backlog_pkts)
			d->max_backlog_pkts = d->txq_n;
		if (d->txq_bytes > d->max_backlog_bytes)
			d->max_backlog_bytes = d->txq_bytes;
	}

	int64_t depart = tx_end + c->delay_ns + draw_jitter(d);
	if (depart < tx_end)
		depart = tx_end; /* a packet cannot leave before it was sent */
	if (!c->reorder && depart < d->last_depart)
		depart = d->last_depart;
	d->last_depart = depart > d->last_depart ? depart : d->last_depart;

	pkt_t p = {.depart = depart, .seq = d->seq++, .slot = slot, .len = len};
	heap_push(d, p);
	if (d->rec) {
		if (c->rate_bps <= 0)
			r.start_ns = t;
		r.depart_ns = depart;
		r.fate = FATE_FORWARDED;
		d->served_cls[r.cls]++;
		rec_write(d, &r);
	}
}

/* Record a packet dropped before the queue (pool exhausted, larger than a slot). */
static void record_other(dir_t *d, const unsigned char *p, uint32_t len, int64_t t)
{
	rec_t r;
	parse_packet(p, len, t, &r);
	if (d->cfg.prio) {
		int busy = d->busy_until > t;
		r.backlog_bytes = clamp_u32(d->wait_bytes + (busy ? d->svc_len : 0));
	} else if (d->cfg.rate_bps > 0) {
		r.backlog_bytes = clamp_u32(fifo_backlog(d, t));
	}
	d->rx_cls[r.cls]++;
	r.fate = FATE_OTHER;
	rec_write(d, &r);
}

/* Read what the kernel has queued on d->in_fd (bounded batch). */
static void read_side(dir_t *d)
{
	for (int i = 0; i < READ_BATCH; i++) {
		uint32_t slot;
		if (slot_alloc(d, &slot) < 0) {
			/* Pool exhausted: drain one packet into a scratch buffer and drop it. */
			static unsigned char scratch[65536];
			ssize_t n = read(d->in_fd, scratch, sizeof scratch);
			if (n <= 0)
				return;
			d->rx_pkts++;
			d->rx_bytes += (uint64_t)n;
			d->overflow_drops++;
			if (d->rec)
				record_other(d, scratch, (uint32_t)n, now_ns());
			continue;
		}
		ssize_t n = read(d->in_fd, slot_ptr(d, slot), g_slot_size);
		if (n <= 0) {
			slot_free(d, slot);
			if (n < 0 && errno != EAGAIN && errno != EINTR)
				die(EXIT_RUNTIME, "read from %s TUN: %s", d->name, strerror(errno));
			return;
		}
		if ((size_t)n >= g_slot_size) {
			d->oversize_drops++;
			if (d->rec)
				record_other(d, slot_ptr(d, slot), (uint32_t)n, now_ns());
			slot_free(d, slot);
			continue;
		}
		on_arrival(d, slot, (uint32_t)n, now_ns());
	}
}

/* Write every packet whose departure time has come. */
static void send_due(dir_t *d, int64_t t)
{
	for (int i = 0; i < WRITE_BATCH && d->heap_n > 0 && d->heap[0].depart <= t; i++) {
		pkt_t p = heap_pop(d);
		int64_t late = now_ns() - p.depart;
		ssize_t n = write(d->out_fd, slot_ptr(d, p.slot), p.len);
		if (n < 0) {
			d->tx_errors++;
		} else {
			d->tx_pkts++;
			d->tx_bytes += p.len;
		}
		if (late > d->late_max)
			d->late_max = late;
		int64_t b = late / 1000;
		d->late_hist[b < LATE_BUCKETS ? b : LATE_BUCKETS - 1]++;
		slot_free(d, p.slot);
	}
}

/* ------------------------------------------------------------------------- */
/* Stats.                                                                     */

static double late_quantile_us(dir_t *d, double q)
{
	uint64_t total = 0, acc = 0;
	for (int i = 0; i < LATE_BUCKETS; i++)
		total += d->late_hist[i];
	if (total == 0)
		return 0.0;
	uint64_t target = (uint64_t)ceil(q * (double)total);
	for (int i = 0; i < LATE_BUCKETS; i++) {
		acc += d->late_hist[i];
		if (acc >= target)
			return (double)i + 0.5;
	}
	return (double)LATE_BUCKETS;
}

static void print_dir(FILE *f, dir_t *d)
{
	fprintf(f,
		"\"%s\":{\"rx_packets\":%" PRIu64 ",\"rx_bytes\":%" PRIu64 ",\"packets\":%" PRIu64
		",\"bytes\":%" PRIu64 ",\"dropped_loss\":%" PRIu64 ",\"dropped_queue\":%" PRIu64
		",\"dropped_overflow\":%" PRIu64 ",\"dropped_oversize\":%" PRIu64 ",\"tx_errors\":%" PRIu64
		",\"queued\":%u,\"max_backlog_packets\":%" PRIu64 ",\"max_backlog_bytes\":%" PRIu64
		",\"late_p50_us\":%.1f,\"late_p99_us\":%.1f,\"late_max_us\":%.1f"
		",\"prio\":%d,\"dropped_queue_high\":%" PRIu64 ",\"pushed_out\":%" PRIu64
		",\"waiting_high\":%u,\"waiting_low\":%u"
		",\"rx_high_packets\":%" PRIu64 ",\"rx_low_packets\":%" PRIu64
		",\"tx_high_packets\":%" PRIu64 ",\"tx_low_packets\":%" PRIu64
		",\"records\":%" PRIu64 ",\"record_errors\":%" PRIu64 "}",
		d->name, d->rx_pkts, d->rx_bytes, d->tx_pkts, d->tx_bytes, d->loss_drops, d->queue_drops,
		d->overflow_drops, d->oversize_drops, d->tx_errors, d->heap_n, d->max_backlog_pkts,
		d->max_backlog_bytes, late_quantile_us(d, 0.5), late_quantile_us(d, 0.99), (double)d->late_max / 1e3,
		d->cfg.prio, d->queue_drops_high, d->pushed_out, d->ring[CLS_HIGH].n, d->ring[CLS_LOW].n,
		d->rx_cls[CLS_HIGH], d->rx_cls[CLS_LOW], d->served_cls[CLS_HIGH], d->served_cls[CLS_LOW],
		d->records, rec_errors);
}

static void print_stats(dir_t *up, dir_t *down, const char *event)
{
	printf("{\"event\":\"%s\",", event);
	print_dir(stdout, up);
	putchar(',');
	print_dir(stdout, down);
	puts("}");
	fflush(stdout);
}

/* ------------------------------------------------------------------------- */
/* Setup.                                                                     */

static void on_signal(int sig)
{
	if (sig == SIGUSR1)
		g_dump = 1;
	else
		g_stop = 1;
}

/* Set MTU and bring the interface up, from inside its namespace. */
static void configure_if(const char *ifname, int mtu)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		die(EXIT_RUNTIME, "socket: %s", strerror(errno));
	struct ifreq ifr;
	memset(&ifr, 0, sizeof ifr);
	strncpy(ifr.ifr_name, ifname, IFNAMSIZ - 1);
	ifr.ifr_mtu = mtu;
	if (ioctl(s, SIOCSIFMTU, &ifr) < 0)
		die(EXIT_RUNTIME, "setting MTU %d on %s: %s", mtu, ifname, strerror(errno));
	memset(&ifr, 0, sizeof ifr);
	strncpy(ifr.ifr_name, ifname, IFNAMSIZ - 1);
	ifr.ifr_qlen = 1000;
	ioctl(s, SIOCSIFTXQLEN, &ifr); /* best effort */
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		die(EXIT_RUNTIME, "reading flags of %s: %s", ifname, strerror(errno));
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		die(EXIT_RUNTIME, "bringing %s up: %s", ifname, strerror(errno));
	close(s);
}

/* Enter namespace `ns`, create TUN `ifname` there, and come back. */
static int open_tun_in_ns(const char *ns, const char *ifname, int mtu, int home_fd)
{
	char path[512];
	snprintf(path, sizeof path, "/run/netns/%s", ns);
	int nsfd = open(path, O_RDONLY | O_CLOEXEC);
	if (nsfd < 0)
		die(errno == ENOENT ? EXIT_NONS : EXIT_PERM, "network namespace %s: %s", ns, strerror(errno));
	if (setns(nsfd, CLONE_NEWNET) < 0)
		die(errno == EPERM ? EXIT_PERM : EXIT_RUNTIME, "entering network namespace %s: %s", ns,
		    strerror(errno));
	close(nsfd);

	int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		die(errno == EPERM || errno == EACCES ? EXIT_PERM : EXIT_NOTUN, "/dev/net/tun: %s",
		    strerror(errno));
	struct ifreq ifr;
	memset(&ifr, 0, sizeof ifr);
	ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
	strncpy(ifr.ifr_name, ifname, IFNAMSIZ - 1);
	if (ioctl(fd, TUNSETIFF, &ifr) < 0)
		die(errno == EPERM ? EXIT_PERM : errno == EBUSY ? EXIT_RUNTIME : EXIT_NOTUN,
		    "creating TUN %s in %s: %s", ifname, ns, strerror(errno));
	configure_if(ifname, mtu);

	if (setns(home_fd, CLONE_NEWNET) < 0)
		die(EXIT_RUNTIME, "returning to the original network namespace: %s", strerror(errno));
	return fd;
}

/* ------------------------------------------------------------------------- */
/* Argument parsing.                                                          */

static void usage(void)
{
	fputs("usage: linkemu --client-ns NS --server-ns NS --client-if IF --server-if IF\n"
	      "               [--up SPEC] [--down SPEC] [--mtu N] [--seed N] [--spin-us N]\n"
	      "               [--max-inflight N] [--rt-prio N (0 = normal scheduling; default 10)]\n"
	      "SPEC: comma-separated key=value, keys:\n"
	      "  rate=BITS_PER_S (0 = unlimited)  delay=S  jitter=S  dist=uniform|normal\n"
	      "  reorder=0|1  loss=PERCENT  ge=P:R:H:K (percent, as netem `loss gemodel p r 1-h 1-k`)\n"
	      "  limit=PACKETS  limit_bytes=BYTES (rate queue; default 1000 packets when rate is set)\n"
	      "  prio=0|1 (1: two strict-priority classes, DSCP EF first, sharing the limit; needs rate)\n"
	      "--records-up PATH, --records-down PATH: one 48-byte record per packet of that direction\n",
	      stderr);
	exit(EXIT_USAGE);
}

static double parse_num(const char *key, const char *v, double lo, double hi)
{
	char *end;
	errno = 0;
	double x = strtod(v, &end);
	if (errno || end == v || *end || !isfinite(x) || x < lo || x > hi)
		die(EXIT_USAGE, "%s=%s: must be a number in [%g, %g]", key, v, lo, hi);
	return x;
}

static void parse_spec(dir_cfg_t *c, const char *which, char *spec)
{
	char *save = NULL;
	for (char *tok = strtok_r(spec, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		if (!eq)
			die(EXIT_USAGE, "--%s: '%s' is not key=value", which, tok);
		*eq = 0;
		const char *k = tok, *v = eq + 1;
		if (!strcmp(k, "rate"))
			c->rate_bps = parse_num(k, v, 0, 1e12);
		else if (!strcmp(k, "delay"))
			c->delay_ns = (int64_t)llround(parse_num(k, v, 0, 60) * 1e9);
		else if (!strcmp(k, "jitter"))
			c->jitter_ns = (int64_t)llround(parse_num(k, v, 0, 60) * 1e9);
		else if (!strcmp(k, "dist")) {
			if (!strcmp(v, "uniform"))
				c->dist = DIST_UNIFORM;
			else if (!strcmp(v, "normal"))
				c->dist = DIST_NORMAL;
			else
				die(EXIT_USAGE, "dist=%s: must be uniform or normal", v);
		} else if (!strcmp(k, "reorder"))
			c->reorder = (int)parse_num(k, v, 0, 1);
		else if (!strcmp(k, "loss"))
			c->loss = parse_num(k, v, 0, 100) / 100.0;
		else if (!strcmp(k, "ge")) {
			double g[4];
			char buf[256];
			snprintf(buf, sizeof buf, "%s", v);
			char *s2 = NULL, *part = strtok_r(buf, ":", &s2);
			for (int i = 0; i < 4; i++) {
				if (!part)
					die(EXIT_USAGE, "ge=%s: needs four percentages P:R:H:K", v);
				g[i] = parse_num("ge", part, 0, 100) / 100.0;
				part = strtok_r(NULL, ":", &s2);
			}
			c->ge = 1;
			c->ge_p = g[0];
			c->ge_r = g[1];
			c->ge_bad_loss = g[2];
			c->ge_good_loss = g[3];
		} else if (!strcmp(k, "limit"))
			c->limit_pkts = (long)parse_num(k, v, 0, 1e7);
		else if (!strcmp(k, "limit_bytes"))
			c->limit_bytes = (long)parse_num(k, v, 0, 1e11);
		else if (!strcmp(k, "prio"))
			c->prio = (int)parse_num(k, v, 0, 1);
		else
			die(EXIT_USAGE, "--%s: unknown key '%s'", which, k);
	}
	if (c->prio && c->rate_bps <= 0)
		die(EXIT_USAGE, "--%s: prio=1 needs rate>0 (the priority queue feeds the rate limiter)", which);
}

static FILE *open_records(const char *path)
{
	FILE *f = fopen(path, "wbe");
	if (!f)
		die(EXIT_RUNTIME, "packet records %s: %s", path, strerror(errno));
	setvbuf(f, NULL, _IOFBF, 1 << 20);
	return f;
}

static void dir_init(dir_t *d, const char *name, uint32_t max_slots, uint64_t seed)
{
	d->name = name;
	d->max_slots = max_slots;
	d->chunks = xcalloc(max_slots / CHUNK_SLOTS + 1, sizeof *d->chunks);
	d->freelist = xcalloc(max_slots + CHUNK_SLOTS, sizeof *d->freelist);
	d->heap = xcalloc(max_slots + CHUNK_SLOTS, sizeof *d->heap);
	d->txq = xcalloc(max_slots, sizeof *d->txq);
	d->late_hist = xcalloc(LATE_BUCKETS, sizeof *d->late_hist);
	if (d->cfg.prio) {
		/* every waiting packet holds a slot, so a ring never holds more than max_slots */
		for (int i = 0; i < 2; i++) {
			d->ring[i].cap = max_slots;
			d->ring[i].q = xcalloc(max_slots, sizeof *d->ring[i].q);
		}
	}
	rng_seed(&d->rng, seed);
	if (d->cfg.rate_bps > 0 && d->cfg.limit_pkts == 0 && d->cfg.limit_bytes == 0)
		d->cfg.limit_pkts = DEFAULT_LIMIT_PKTS;
	if (d->cfg.limit_pkts > (long)max_slots)
		d->cfg.limit_pkts = max_slots;
}

int main(int argc, char **argv)
{
	const char *cns = NULL, *sns = NULL, *cif = NULL, *sif = NULL;
	char *upspec = NULL, *downspec = NULL;
	const char *uprec = NULL, *downrec = NULL;
	int mtu = 1500;
	uint64_t seed = 1;
	int rt_prio = 10;
	int64_t spin_ns = 200 * 1000; /* VM wake-up latency is 50-100 us; see docs/emulation.md */
	uint32_t max_inflight = DEFAULT_MAX_INFLIGHT;
	static dir_t up, down;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help"))
			usage();
		if (i + 1 >= argc)
			usage();
		const char *v = argv[++i];
		if (!strcmp(a, "--client-ns"))
			cns = v;
		else if (!strcmp(a, "--server-ns"))
			sns = v;
		else if (!strcmp(a, "--client-if"))
			cif = v;
		else if (!strcmp(a, "--server-if"))
			sif = v;
		else if (!strcmp(a, "--up"))
			upspec = strdup(v);
		else if (!strcmp(a, "--down"))
			downspec = strdup(v);
		else if (!strcmp(a, "--records-up"))
			uprec = v;
		else if (!strcmp(a, "--records-down"))
			downrec = v;
		else if (!strcmp(a, "--mtu"))
			mtu = (int)parse_num("mtu", v, 576, 65000);
		else if (!strcmp(a, "--seed"))
			seed = (uint64_t)parse_num("seed", v, 0, 9007199254740992.0);
		else if (!strcmp(a, "--spin-us"))
			spin_ns = (int64_t)(parse_num("spin-us", v, 0, 10000) * 1000);
		else if (!strcmp(a, "--rt-prio"))
			rt_prio = (int)parse_num("rt-prio", v, 0, 99);
		else if (!strcmp(a, "--max-inflight"))
			max_inflight = (uint32_t)parse_num("max-inflight", v, CHUNK_SLOTS, 1 << 24);
		else
			die(EXIT_USAGE, "unknown option %s (see --help)", a);
	}
	if (!cns || !sns || !cif || !sif)
		usage();
	if (strlen(cif) >= IFNAMSIZ || strlen(sif) >= IFNAMSIZ)
		die(EXIT_USAGE, "interface names must be shorter than %d characters", IFNAMSIZ);
	if (upspec)
		parse_spec(&up.cfg, "up", upspec);
	if (downspec)
		parse_spec(&down.cfg, "down", downspec);
	max_inflight = (max_inflight + CHUNK_SLOTS - 1) / CHUNK_SLOTS * CHUNK_SLOTS;
	/* Opened before the namespaces are touched, so a bad path fails fast. */
	if (uprec)
		up.rec = open_records(uprec);
	if (downrec)
		down.rec = open_records(downrec);
	g_slot_size = ((size_t)mtu + 64 + 63) & ~(size_t)63;

	/* Die with the driver, even if it is SIGKILLed. */
	pid_t parent = getppid();
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != parent)
		return 0;
	/* hrtimer slack defaults to 50 us; we want the wake-up at the deadline. */
	prctl(PR_SET_TIMERSLACK, 1UL);
	/* On a busy host a normal thread can wait milliseconds for a CPU, which would show up as
	 * delay the profile did not ask for.  Real-time priority (best effort: needs CAP_SYS_NICE)
	 * makes it run when a packet is due; the kernel's RT throttling still leaves other tasks
	 * 5 % of the CPU, and the thread sleeps whenever nothing is due. */
	int rt_ok = 0;
	if (rt_prio > 0) {
		struct sched_param sp = {.sched_priority = rt_prio};
		if (sched_setscheduler(0, SCHED_FIFO, &sp) == 0)
			rt_ok = 1;
		else
			fprintf(stderr, "linkemu: warning: no real-time priority (%s); delays may be less exact "
					"on a busy host\n", strerror(errno));
	}

	sigset_t block, waitmask;
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGUSR1);
	sigaddset(&block, SIGHUP);
	sigprocmask(SIG_BLOCK, &block, &waitmask);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	int home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (home < 0)
		die(EXIT_RUNTIME, "/proc/self/ns/net: %s", strerror(errno));
	int cfd = open_tun_in_ns(cns, cif, mtu, home);
	int sfd = open_tun_in_ns(sns, sif, mtu, home);
	close(home);

	dir_init(&up, "up", max_inflight, seed * 2 + 0);
	dir_init(&down, "down", max_inflight, seed * 2 + 1);
	up.in_fd = cfd;
	up.out_fd = sfd;
	down.in_fd = sfd;
	down.out_fd = cfd;

	/* Watch stdin only when it is a pipe or socket: its end means the driver is gone. */
	struct stat st;
	int watch_stdin = fstat(0, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));

	struct pollfd pfd[3] = {
		{.fd = cfd, .events = POLLIN},
		{.fd = sfd, .events = POLLIN},
		{.fd = watch_stdin ? 0 : -1, .events = POLLIN},
	};

	int64_t win_start = now_ns(), spun = 0, slept = 0;
	int rt_now = rt_ok;
	int spin_on = spin_ns > 0;

	puts("ready");
	fflush(stdout);

	while (!g_stop) {
		int64_t t = now_ns();
		if (up.cfg.prio)
			prio_service(&up, t);
		if (down.cfg.prio)
			prio_service(&down, t);
		send_due(&up, t);
		send_due(&down, t);
		if (g_dump) {
			g_dump = 0;
			/* records first: whoever asked for stats may read the files next */
			if (up.rec)
				fflush(up.rec);
			if (down.rec)
				fflush(down.rec);
			print_stats(&up, &down, "stats");
		}

		int64_t next = INT64_MAX;
		if (up.heap_n)
			next = up.heap[0].depart;
		if (down.heap_n && down.heap[0].depart < next)
			next = down.heap[0].depart;
		/* A waiting packet's service start is a deadline too: it decides what departs next. */
		if (up.cfg.prio) {
			int64_t s = prio_next_start(&up);
			if (s < next)
				next = s;
		}
		if (down.cfg.prio) {
			int64_t s = prio_next_start(&down);
			if (s < next)
				next = s;
		}

		struct timespec ts, *tsp = NULL;
		t = now_ns();
		/* Spin budget: when deadlines come so often that spinning would take more than a
		 * quarter of the time (high packet rates), sleep to the deadline instead.  Otherwise
		 * the thread would be busy all the time, and at real-time priority the kernel's RT
		 * throttling would then stop it for 50 ms every second. */
		if (t - win_start >= SPIN_WINDOW_NS) {
			int64_t win = t - win_start;
			spin_on = spin_ns > 0 && spun < win / 4;
			/* Real-time priority only while the thread has slack: busy more than 90 % of
			 * the time (about 1 Gbit/s here) it would hit RT throttling (950 ms per second)
			 * and stall for 50 ms, so it runs as a normal thread until the load drops. */
			int busy = win - slept > win * 9 / 10, idle = win - slept < win * 7 / 10;
			if (rt_prio > 0 && rt_now && busy) {
				struct sched_param sp = {.sched_priority = 0};
				if (sched_setscheduler(0, SCHED_OTHER, &sp) == 0)
					rt_now = 0;
			} else if (rt_prio > 0 && rt_ok && !rt_now && idle) {
				struct sched_param sp = {.sched_priority = rt_prio};
				if (sched_setscheduler(0, SCHED_FIFO, &sp) == 0)
					rt_now = 1;
			}
			spun = 0;
			slept = 0;
			win_start = t;
		}
		int spinning = 0;
		if (next != INT64_MAX) {
			int64_t wait = next - t - (spin_on ? spin_ns : 0);
			if (wait < 0)
				wait = 0;
			spinning = wait == 0 && next > t;
			ts.tv_sec = wait / NSEC;
			ts.tv_nsec = wait % NSEC;
			tsp = &ts;
		}
		int r = ppoll(pfd, 3, tsp, &waitmask);
		if (spinning)
			spun += now_ns() - t;
		else if (!tsp || tsp->tv_sec || tsp->tv_nsec)
			slept += now_ns() - t;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			die(EXIT_RUNTIME, "ppoll: %s", strerror(errno));
		}
		if (r == 0)
			continue;
		if (pfd[0].revents & POLLIN)
			read_side(&up);
		if (pfd[1].revents & POLLIN)
			read_side(&down);
		if ((pfd[0].revents | pfd[1].revents) & (POLLERR | POLLNVAL))
			die(EXIT_RUNTIME, "a TUN device went away");
		if (pfd[2].revents) {
			char buf[256];
			ssize_t n = read(0, buf, sizeof buf);
			if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
				break;
		}
	}
	/* Close the records before the final line, so they are complete once it is read. */
	if (up.rec && fclose(up.rec) != 0)
		rec_errors++;
	if (down.rec && fclose(down.rec) != 0)
		rec_errors++;
	up.rec = down.rec = NULL;
	print_stats(&up, &down, "final");
	return 0;
}

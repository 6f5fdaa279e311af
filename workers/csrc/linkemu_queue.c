/*
 * linkemu_queue.c: the per-direction packet path of linkemu (see linkemu.c): the slot pool,
 * the delay line's heap, loss and jitter draws, packet parsing and per-packet records, the
 * FIFO rate stage and the served queue (prio=1 and qdisc=drophead|codel|pie: packets wait in
 * real rings and start serialisation at service time), reading packets in and writing them out
 * when due.
 */
#include "linkemu.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

size_t g_slot_size;
uint32_t g_mtu;
uint64_t rec_errors;

/* ------------------------------------------------------------------------- */
/* Slot pool.                                                                */

int slot_alloc(dir_t *d, uint32_t *out)
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

pkt_t heap_pop(dir_t *d)
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

/* ---- The served queue: prio=1 (two FIFOs, EF first) or one FIFO with qdisc=drophead, codel
 * or pie, served at service time ----------------------------------------------------------- */

static inline qent_t *ring_at(ring_t *q, uint32_t i) { return &q->q[(q->head + i) % q->cap]; }

static inline void ring_push(ring_t *q, const qent_t *e)
{
	*ring_at(q, q->n) = *e;
	q->n++;
}

static inline qent_t ring_pop_tail(ring_t *q)
{
	q->n--;
	return *ring_at(q, q->n);
}

/* Take the head of ring `ring` out of the queue (its bytes leave the waiting counts). */
qent_t served_pop(dir_t *d, int ring)
{
	ring_t *q = &d->ring[ring];
	qent_t e = q->q[q->head];
	q->head = (q->head + 1) % q->cap;
	q->n--;
	d->wait_bytes -= e.len;
	d->wait_cls_bytes[e.r.cls] -= e.len;
	return e;
}

/* When the next packet can start serialisation: after the one in service, and not before the
 * earliest waiting packet arrived.  INT64_MAX when nothing waits. */
int64_t served_next_start(dir_t *d)
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

/* When a packet of `len` bytes that starts serialisation at `s` has left the rate stage. */
static int64_t served_tx_end(dir_t *d, int64_t s, uint32_t len)
{
	const dir_cfg_t *c = &d->cfg;
	if (c->trace_n)
		return trace_tx_end(d, s, len);
	int64_t need = c->rate_bps > 0 ? (int64_t)llround((double)len * 8.0 * 1e9 / c->rate_bps) : 0;
	return has_outage(c) ? outage_tx_end(d, s, need) : s + need;
}

/* Start every service whose start time s is before `now`.  Strictly before: a packet read at
 * `now` may be high priority and must be able to win a service starting at `now`.  Starts use
 * the virtual time s, not the (slightly later) time of the decision, so the rate stays exact,
 * and CoDel and PIE judge the queue at s too. */
void served_service(dir_t *d, int64_t now)
{
	dir_cfg_t *c = &d->cfg;
	for (;;) {
		int64_t s = served_next_start(d);
		if (s >= now)
			return;
		qent_t e;
		if (c->qdisc == Q_CODEL) {
			/* CoDel may drop every packet that has arrived by s: then the next start is a later
			 * packet's arrival, or nothing waits. */
			if (!codel_take(d, s, &e))
				continue;
		} else {
			ring_t *hi = &d->ring[CLS_HIGH];
			e = served_pop(d, hi->n && hi->q[hi->head].r.arrival_ns <= s ? CLS_HIGH : CLS_LOW);
		}
		if (c->qdisc == Q_PIE) {
			pie_catch_up(d, s);
			pie_dequeued(d, s - e.r.arrival_ns, d->ring[CLS_LOW].n == 0);
		}
		int64_t tx_end = served_tx_end(d, s, e.len);
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

/* A packet leaves the queue without being served: its record (when records are on) and slot. */
void served_drop(dir_t *d, qent_t *e, int fate)
{
	if (d->rec) {
		e->r.fate = (uint8_t)fate;
		rec_write(d, &e->r);
	}
	slot_free(d, e->slot);
}

static void served_arrival(dir_t *d, uint32_t slot, uint32_t len, int64_t t)
{
	dir_cfg_t *c = &d->cfg;
	qent_t e = {.slot = slot, .len = len};
	parse_packet(slot_ptr(d, slot), len, t, &e.r);
	d->rx_pkts++;
	d->rx_bytes += len;
	d->rx_cls[e.r.cls]++;

	/* Start what should have started before this packet came, so it sees the queue as of t. */
	served_service(d, t);
	int busy = d->busy_until > t;
	ring_t *lo = &d->ring[CLS_LOW];
	uint64_t qpkts = d->ring[CLS_HIGH].n + lo->n + (uint64_t)busy;
	uint64_t qbytes = d->wait_bytes + (busy ? d->svc_len : 0);
	e.r.backlog_bytes = clamp_u32(qbytes);
	/* One ring unless prio: drop-head and the AQMs keep arrival order whatever the class. */
	int ring = c->prio ? e.r.cls : CLS_LOW;

	if (lose_packet(d)) {
		d->loss_drops++;
		served_drop(d, &e, FATE_LOSS);
		return;
	}
	if (!fits(c, qpkts, qbytes, len) && c->prio && e.r.cls == CLS_HIGH) {
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
				served_drop(d, &v, FATE_PUSHED_OUT);
			}
		}
	}
	if (!fits(c, qpkts, qbytes, len) && c->qdisc == Q_DROPHEAD) {
		/* Drop from the head (the oldest waiting packet, never the one in service) until the new
		 * one fits, when emptying the waiting room would make it fit at all. */
		if (fits(c, qpkts - lo->n, qbytes - d->wait_bytes, len)) {
			while (!fits(c, qpkts, qbytes, len)) {
				qent_t v = served_pop(d, CLS_LOW);
				qpkts--;
				qbytes -= v.len;
				d->head_drops++;
				v.r.start_ns = t; /* a head drop's record: when the arrival pushed it out */
				served_drop(d, &v, FATE_HEADDROP);
			}
		}
	}
	if (!fits(c, qpkts, qbytes, len)) {
		d->queue_drops++;
		if (e.r.cls == CLS_HIGH)
			d->queue_drops_high++;
		served_drop(d, &e, FATE_TAILDROP);
		return;
	}
	if (c->qdisc == Q_PIE && pie_drop_early(d, t, qbytes)) {
		d->aqm_drops++;
		served_drop(d, &e, FATE_AQM);
		return;
	}
	ring_push(&d->ring[ring], &e);
	d->wait_bytes += len;
	d->wait_cls_bytes[e.r.cls] += len;
	if (qpkts + 1 > d->max_backlog_pkts)
		d->max_backlog_pkts = qpkts + 1;
	if (qbytes + len > d->max_backlog_bytes)
		d->max_backlog_bytes = qbytes + len;
}

/* Decide the fate of a packet that was just read into `slot`. */
void on_arrival(dir_t *d, uint32_t slot, uint32_t len, int64_t t)
{
	dir_cfg_t *c = &d->cfg;
	if (is_served(c)) {
		served_arrival(d, slot, len, t);
		return;
	}
	/* Records only: the FIFO decisions below are the calibrated ones and do not read `r`. */
	rec_t r;
	if (d->rec) {
		parse_packet(slot_ptr(d, slot), len, t, &r);
		r.backlog_bytes = has_rate_stage(c) ? clamp_u32(fifo_backlog(d, t)) : 0;
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
	if (has_rate_stage(c)) {
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
		if (c->trace_n) {
			tx_end = trace_tx_end(d, start, len);
		} else {
			int64_t need = c->rate_bps > 0 ? (int64_t)llround((double)len * 8.0 * 1e9 / c->rate_bps) : 0;
			tx_end = has_outage(c) ? outage_tx_end(d, start, need) : start + need;
		}
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
		if (!has_rate_stage(c))
			r.start_ns = t;
		r.depart_ns = depart;
		r.fate = FATE_FORWARDED;
		d->served_cls[r.cls]++;
		rec_write(d, &r);
	}
}

/* Record a packet dropped before the queue (pool exhausted, larger than a slot). */
void record_other(dir_t *d, const unsigned char *p, uint32_t len, int64_t t)
{
	rec_t r;
	parse_packet(p, len, t, &r);
	if (is_served(&d->cfg)) {
		int busy = d->busy_until > t;
		r.backlog_bytes = clamp_u32(d->wait_bytes + (busy ? d->svc_len : 0));
	} else if (has_rate_stage(&d->cfg)) {
		r.backlog_bytes = clamp_u32(fifo_backlog(d, t));
	}
	d->rx_cls[r.cls]++;
	r.fate = FATE_OTHER;
	rec_write(d, &r);
}

/* A packet read but dropped before the link (no free slot, too large, or of a shape that cannot
 * be cut): it counts as received and in *counter, and gets a record when records are on. */
void dropped_unqueued(dir_t *d, const unsigned char *p, uint32_t len, int64_t t, uint64_t *counter)
{
	d->rx_pkts++;
	d->rx_bytes += len;
	(*counter)++;
	if (d->rec)
		record_other(d, p, len, t);
}

/* Read what the kernel has queued on d->in_fd (bounded batch). */
void read_side(dir_t *d)
{
	if (g_offload) {
		offload_read_side(d);
		return;
	}
	for (int i = 0; i < READ_BATCH; i++) {
		uint32_t slot;
		if (slot_alloc(d, &slot) < 0) {
			/* Pool exhausted: drain one packet into a scratch buffer and drop it. */
			static unsigned char scratch[65536];
			ssize_t n = read(d->in_fd, scratch, sizeof scratch);
			if (n <= 0)
				return;
			dropped_unqueued(d, scratch, (uint32_t)n, now_ns(), &d->overflow_drops);
			continue;
		}
		/* Read up to the whole slot: a packet longer than its room is then seen, and dropped. */
		ssize_t n = read(d->in_fd, slot_ptr(d, slot), g_slot_size);
		if (n <= 0) {
			slot_free(d, slot);
			if (n < 0 && errno != EAGAIN && errno != EINTR)
				die(EXIT_RUNTIME, "read from %s TUN: %s", d->name, strerror(errno));
			return;
		}
		if ((size_t)n > slot_room()) {
			d->oversize_drops++;
			if (d->rec)
				record_other(d, slot_ptr(d, slot), (uint32_t)n, now_ns());
			slot_free(d, slot);
			continue;
		}
		on_arrival(d, slot, (uint32_t)n, now_ns());
	}
}

/* A packet has been written (ok) or refused by the kernel at `now`: count it, free its slot. */
void sent(dir_t *d, const pkt_t *p, int64_t now, int ok)
{
	int64_t late = now - p->depart;
	if (ok) {
		d->tx_pkts++;
		d->tx_bytes += p->len;
	} else {
		d->tx_errors++;
	}
	if (late > d->late_max)
		d->late_max = late;
	int64_t b = late / 1000;
	d->late_hist[b < LATE_BUCKETS ? b : LATE_BUCKETS - 1]++;
	slot_free(d, p->slot);
}

/* Write every packet whose departure time has come; how many left (or were refused). */
int send_due(dir_t *d, int64_t t)
{
	int i = 0;
	while (i < WRITE_BATCH && d->heap_n > 0 && d->heap[0].depart <= t) {
		if (g_offload) {
			i += offload_send(d, t);
			continue;
		}
		pkt_t p = heap_pop(d);
		int64_t now = now_ns();
		sent(d, &p, now, write(d->out_fd, slot_ptr(d, p.slot), p.len) >= 0);
		i++;
	}
	return i;
}

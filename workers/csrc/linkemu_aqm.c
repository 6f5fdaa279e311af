/*
 * linkemu_aqm.c: the drop decisions of the two active queue managements a direction's served
 * queue can run (qdisc=codel, qdisc=pie), implemented from their RFCs.  Both judge the queue at
 * the virtual times of linkemu_queue.c (a service's start, a packet's arrival), so a run's drops
 * do not depend on when the event loop happened to wake.  Neither marks ECN: the lab's links drop,
 * as Mahimahi's do.
 *
 * CoDel (RFC 8289, "Controlled Delay Active Queue Management"): at each dequeue the packet's
 * sojourn time is compared with TARGET; once it has stayed above it for INTERVAL the queue drops
 * at dequeue, at times that follow the control law t + INTERVAL / sqrt(count), until a packet's
 * sojourn falls below TARGET (or the queue holds at most one MTU).  Defaults 5 ms and 100 ms.
 *
 * PIE (RFC 8033, "Proportional Integral Controller Enhanced"): every T_UPDATE the drop
 * probability moves by alpha (0.125) times the latency's distance from QDELAY_REF plus beta
 * (1.25) times its change, both in seconds, scaled down while the probability is small (the
 * RFC's auto-tuning), capped at +0.02 per update above 0.1, and decayed by 2 % while the queue
 * stays empty; arriving packets are dropped with that probability, except during the burst
 * allowance (MAX_BURST from an uncongested state), while the latency is below half the reference
 * and the probability below 0.2, or when the queue holds at most two packets.  The latency is
 * measured with timestamps (RFC 8033 allows them instead of a departure-rate estimate): the
 * sojourn time of the last packet that started service, or 0 when that left the queue empty.
 * Defaults QDELAY_REF 15 ms, T_UPDATE 15 ms, MAX_BURST 150 ms; the optional de-randomisation
 * is not used.
 */
#include "linkemu.h"

#include <string.h>

#define CODEL_TARGET_NS (5 * 1000 * 1000LL)
#define CODEL_INTERVAL_NS (100 * 1000 * 1000LL)
#define PIE_REF_NS (15 * 1000 * 1000LL)
#define PIE_TUPDATE_NS (15 * 1000 * 1000LL)
#define PIE_MAX_BURST_NS (150 * 1000 * 1000LL)
#define PIE_ALPHA 0.125
#define PIE_BETA 1.25
/* Updates PIE runs to catch up after an idle spell, at most: 10000 x 15 ms = 150 s of idle
 * decays any probability to 0 and restores the burst allowance long before. */
#define PIE_MAX_CATCH_UP 10000

void aqm_defaults(dir_cfg_t *c)
{
	if (c->qdisc == Q_CODEL) {
		if (!c->aqm_target_ns)
			c->aqm_target_ns = CODEL_TARGET_NS;
		if (!c->aqm_interval_ns)
			c->aqm_interval_ns = CODEL_INTERVAL_NS;
	} else if (c->qdisc == Q_PIE) {
		if (!c->aqm_target_ns)
			c->aqm_target_ns = PIE_REF_NS;
		if (!c->aqm_interval_ns)
			c->aqm_interval_ns = PIE_TUPDATE_NS;
		if (!c->aqm_burst_ns)
			c->aqm_burst_ns = PIE_MAX_BURST_NS;
	}
}

void aqm_start(dir_t *d, int64_t t0)
{
	d->cd_first_above = d->cd_drop_next = 0;
	d->cd_count = d->cd_lastcount = 0;
	d->cd_dropping = 0;
	d->pie_p = 0.0;
	d->pie_qdelay = d->pie_qdelay_old = 0;
	d->pie_next_update = t0 + d->cfg.aqm_interval_ns;
	d->pie_burst_left = d->cfg.aqm_burst_ns;
}

/* ---- CoDel ------------------------------------------------------------------------------- */

static int64_t codel_control_law(const dir_t *d, int64_t t, uint32_t count)
{
	return t + (int64_t)llround((double)d->cfg.aqm_interval_ns / sqrt((double)count));
}

/* RFC 8289's dodequeue: take the head if it has arrived by `now` and say whether its sojourn has
 * been above TARGET for a whole INTERVAL.  0 when nothing is there (which resets the timer). */
static int codel_pop(dir_t *d, int64_t now, qent_t *e, int *ok_to_drop)
{
	ring_t *q = &d->ring[CLS_LOW];
	*ok_to_drop = 0;
	if (q->n == 0 || q->q[q->head].r.arrival_ns > now) {
		d->cd_first_above = 0;
		return 0;
	}
	*e = served_pop(d, CLS_LOW);
	int64_t sojourn = now - e->r.arrival_ns;
	if (sojourn < d->cfg.aqm_target_ns || d->wait_bytes <= g_mtu) {
		d->cd_first_above = 0; /* below target, or too little queued to matter */
	} else if (d->cd_first_above == 0) {
		d->cd_first_above = now + d->cfg.aqm_interval_ns;
	} else if (now >= d->cd_first_above) {
		*ok_to_drop = 1;
	}
	return 1;
}

/* A CoDel drop's record carries the time of the decision in start_ns (it never starts service). */
static void codel_drop(dir_t *d, qent_t *e, int64_t now)
{
	d->aqm_drops++;
	e->r.start_ns = now;
	served_drop(d, e, FATE_AQM);
}

/* RFC 8289's dequeue at `now`: the packet to serve in *out (1), or 0 when CoDel dropped every
 * packet that had arrived by then. */
int codel_take(dir_t *d, int64_t now, qent_t *out)
{
	qent_t e;
	int ok;
	if (!codel_pop(d, now, &e, &ok)) {
		d->cd_dropping = 0;
		return 0;
	}
	if (d->cd_dropping) {
		if (!ok)
			d->cd_dropping = 0; /* the sojourn is below target again: leave the drop state */
		while (d->cd_dropping && now >= d->cd_drop_next) {
			codel_drop(d, &e, now);
			d->cd_count++;
			if (!codel_pop(d, now, &e, &ok)) {
				d->cd_dropping = 0;
				return 0;
			}
			if (!ok)
				d->cd_dropping = 0;
			else
				d->cd_drop_next = codel_control_law(d, d->cd_drop_next, d->cd_count);
		}
	} else if (ok) {
		/* Enter the drop state: drop this one, serve the next, and resume the drop rate of the
		 * last episode if it ended recently (the RFC's count memory). */
		codel_drop(d, &e, now);
		int have = codel_pop(d, now, &e, &ok);
		d->cd_dropping = 1;
		uint32_t delta = d->cd_count - d->cd_lastcount;
		d->cd_count = delta > 1 && now - d->cd_drop_next < 16 * d->cfg.aqm_interval_ns ? delta : 1;
		d->cd_drop_next = codel_control_law(d, now, d->cd_count);
		d->cd_lastcount = d->cd_count;
		if (!have)
			return 0;
	}
	*out = e;
	return 1;
}

/* ---- PIE --------------------------------------------------------------------------------- */

/* RFC 8033's calculate_drop_prob, run every T_UPDATE. */
static void pie_update(dir_t *d)
{
	const dir_cfg_t *c = &d->cfg;
	double cur = (double)d->pie_qdelay / 1e9, old = (double)d->pie_qdelay_old / 1e9;
	double ref = (double)c->aqm_target_ns / 1e9;
	double p = PIE_ALPHA * (cur - ref) + PIE_BETA * (cur - old);
	/* Auto-tuning: small probabilities move in small steps. */
	if (d->pie_p < 0.000001)
		p /= 2048;
	else if (d->pie_p < 0.00001)
		p /= 512;
	else if (d->pie_p < 0.0001)
		p /= 128;
	else if (d->pie_p < 0.001)
		p /= 32;
	else if (d->pie_p < 0.01)
		p /= 8;
	else if (d->pie_p < 0.1)
		p /= 2;
	if (d->pie_p >= 0.1 && p > 0.02)
		p = 0.02; /* no big jumps once dropping is heavy */
	d->pie_p += p;
	if (d->pie_qdelay == 0 && d->pie_qdelay_old == 0)
		d->pie_p *= 0.98; /* the queue stays empty: decay */
	if (d->pie_p < 0)
		d->pie_p = 0;
	if (d->pie_p > 1)
		d->pie_p = 1;
	d->pie_burst_left = d->pie_burst_left > c->aqm_interval_ns ? d->pie_burst_left - c->aqm_interval_ns : 0;
	if (d->pie_p == 0 && cur < ref / 2 && old < ref / 2)
		d->pie_burst_left = c->aqm_burst_ns; /* uncongested again: a new burst is allowed */
	d->pie_qdelay_old = d->pie_qdelay;
}

/* Run the updates due by `t` (the state between events is what the last event left). */
void pie_catch_up(dir_t *d, int64_t t)
{
	int64_t step = d->cfg.aqm_interval_ns;
	if (t < d->pie_next_update)
		return;
	int64_t due = (t - d->pie_next_update) / step + 1;
	if (due > PIE_MAX_CATCH_UP)
		d->pie_next_update += (due - PIE_MAX_CATCH_UP) * step;
	while (d->pie_next_update <= t) {
		pie_update(d);
		d->pie_next_update += step;
	}
}

void pie_dequeued(dir_t *d, int64_t sojourn, int empty) { d->pie_qdelay = empty ? 0 : sojourn; }

/* RFC 8033's drop_early for a packet arriving at `t` to a queue of `qbytes`. */
int pie_drop_early(dir_t *d, int64_t t, uint64_t qbytes)
{
	pie_catch_up(d, t);
	if (d->pie_burst_left > 0)
		return 0;
	if (d->pie_qdelay_old < d->cfg.aqm_target_ns / 2 && d->pie_p < 0.2)
		return 0;
	if (qbytes <= 2 * (uint64_t)g_mtu)
		return 0;
	return rng_unit(&d->rng) < d->pie_p;
}

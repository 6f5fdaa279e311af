/*
 * linkemu_trace.c: a direction's rate stage driven by a Mahimahi-format trace (`trace=PATH`)
 * instead of a constant rate, and the outage schedules: periodic (`outage=ON:OFF`, seconds) or
 * windows once (`outages=S:E/S:E/...`, seconds from the direction's time 0), during whose "off"
 * parts the rate stage serves nothing and packets wait in the queue.
 *
 * The trace file has one integer per line: a millisecond timestamp at which the link offers one
 * delivery opportunity of TRACE_OPP_BYTES bytes; a timestamp repeated n times offers n.  The
 * times are non-decreasing and the trace loops at its last timestamp (the period), as in
 * Mahimahi's link shell (Netravali et al., "Mahimahi: Accurate Record-and-Replay for HTTP",
 * USENIX ATC 2015).  Time 0 is when the direction was set up.
 *
 * A packet is served by the opportunities from its start on (its arrival, or the end of the
 * packet before it): each takes up to TRACE_OPP_BYTES of it, a packet larger than what is left
 * of an opportunity continues in the next one, and it leaves the rate stage at the opportunity
 * that carries its last byte.  What a packet leaves of an opportunity serves the next packet only
 * if that one is already waiting; an opportunity nobody waits for is lost, as on a real link.
 * Because the queue is FIFO, each packet's departure is known when it arrives, which is how the
 * constant-rate stage works too (linkemu_queue.c); the queue limit applies unchanged.
 */
#include "linkemu.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int64_t opp_ns(const dir_t *d, uint64_t k)
{
	const dir_cfg_t *c = &d->cfg;
	int64_t loop = (int64_t)(k / c->trace_n);
	return d->tr_t0 + (loop * c->trace_period_ms + c->trace_ms[k % c->trace_n]) * 1000000LL;
}

/* The first opportunity at or after `start` (its absolute index across loops). */
static uint64_t first_at_or_after(const dir_t *d, int64_t start)
{
	const dir_cfg_t *c = &d->cfg;
	int64_t rel = start - d->tr_t0;
	if (rel < 0)
		rel = 0;
	int64_t period_ns = c->trace_period_ms * 1000000LL;
	int64_t loop = rel / period_ns;
	int64_t in_loop_ms = (rel - loop * period_ns + 999999) / 1000000; /* ceil to the ms */
	uint32_t lo = 0, hi = c->trace_n;                                   /* lower_bound */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (c->trace_ms[mid] < in_loop_ms)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == c->trace_n) { /* nothing left in this loop: the next one's first */
		loop++;
		lo = 0;
	}
	return (uint64_t)loop * c->trace_n + lo;
}

int64_t trace_tx_end(dir_t *d, int64_t start, uint32_t len)
{
	if (opp_ns(d, d->tr_k) < start) {
		/* The link was idle: what was left of the current opportunity is gone. */
		d->tr_k = first_at_or_after(d, start);
		d->tr_left = TRACE_OPP_BYTES;
	}
	uint32_t remaining = len;
	for (;;) {
		uint32_t take = remaining < d->tr_left ? remaining : d->tr_left;
		int64_t t = opp_ns(d, d->tr_k);
		remaining -= take;
		d->tr_left -= take;
		if (d->tr_left == 0) {
			d->tr_k++;
			d->tr_left = TRACE_OPP_BYTES;
		}
		if (remaining == 0)
			return t;
	}
}

/* The first outage window that ends after `t` (win_n when none does). */
static uint32_t window_after(const dir_cfg_t *c, int64_t rel)
{
	uint32_t lo = 0, hi = c->win_n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (c->win_end[mid] <= rel)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int64_t outage_tx_end(const dir_t *d, int64_t start, int64_t need_ns)
{
	const dir_cfg_t *c = &d->cfg;
	int64_t t = start;
	if (c->win_n) {
		for (;;) {
			uint32_t w = window_after(c, t - d->tr_t0);
			if (w == c->win_n)
				return t + need_ns; /* no outage ahead */
			int64_t ws = d->tr_t0 + c->win_start[w], we = d->tr_t0 + c->win_end[w];
			if (t >= ws) { /* inside the window: wait for its end */
				t = we;
				continue;
			}
			if (t + need_ns <= ws)
				return t + need_ns;
			need_ns -= ws - t; /* serialisation pauses over the outage and goes on after it */
			t = we;
		}
	}
	int64_t period = c->on_ns + c->off_ns;
	for (;;) {
		int64_t phase = (t - d->tr_t0) % period;
		if (phase < 0)
			phase += period;
		if (phase >= c->on_ns) { /* the link is down: wait for the next "on" */
			t += period - phase;
			continue;
		}
		int64_t left = c->on_ns - phase;
		if (need_ns <= left)
			return t + need_ns;
		need_ns -= left; /* serialisation pauses over the outage and goes on after it */
		t += left;
	}
}

/* outages=S:E/S:E/... in seconds: sorted, apart, each longer than 0 and within a day. */
int outage_windows_parse(dir_cfg_t *c, const char *spec, char *err, size_t errlen)
{
	size_t cap = 16, n = 0;
	int64_t *ws = malloc(cap * sizeof *ws), *we = malloc(cap * sizeof *we);
	const char *p = spec;
	int rc = 0;
	while (!rc && *p) {
		char *end;
		double a = strtod(p, &end), b = -1;
		int bad = end == p || *end != ':';
		if (!bad) {
			p = end + 1;
			b = strtod(p, &end);
			bad = end == p || (*end && *end != '/');
			p = *end ? end + 1 : end;
		}
		if (bad || !(a >= 0) || !(b > a) || b > 86400.0) {
			snprintf(err, errlen, "outages=%.60s: window %zu: needs START:END seconds, 0 <= START < END <= 86400",
				 spec, n + 1);
			rc = -1;
			break;
		}
		int64_t s0 = (int64_t)llround(a * 1e9), e0 = (int64_t)llround(b * 1e9);
		if (n && s0 < we[n - 1]) {
			snprintf(err, errlen, "outages=%.60s: window %zu starts before the one above ends", spec, n + 1);
			rc = -1;
		} else if (n >= OUTAGE_MAX_WINDOWS) {
			snprintf(err, errlen, "outages=: more than %d windows", OUTAGE_MAX_WINDOWS);
			rc = -1;
		} else {
			if (n == cap) {
				cap *= 2;
				ws = realloc(ws, cap * sizeof *ws);
				we = realloc(we, cap * sizeof *we);
			}
			ws[n] = s0;
			we[n++] = e0;
		}
	}
	if (!rc && n == 0) {
		snprintf(err, errlen, "outages=: needs at least one START:END window");
		rc = -1;
	}
	if (rc) {
		free(ws);
		free(we);
		return -1;
	}
	free(c->win_start);
	free(c->win_end);
	c->win_start = ws;
	c->win_end = we;
	c->win_n = (uint32_t)n;
	return 0;
}

void trace_start(dir_t *d, int64_t t0)
{
	d->tr_t0 = t0;
	d->tr_k = 0;
	d->tr_left = TRACE_OPP_BYTES;
}

int trace_load(dir_cfg_t *c, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		snprintf(err, errlen, "trace=%s: %s", path, strerror(errno));
		return -1;
	}
	size_t cap = 4096, n = 0;
	int64_t *ms = malloc(cap * sizeof *ms);
	char line[64];
	long lineno = 0;
	int rc = 0;
	while (!rc && fgets(line, sizeof line, f)) {
		lineno++;
		if (line[strspn(line, " \t\r\n")] == 0)
			continue; /* a blank line (the last newline, say), as the lab's parser allows */
		char *end;
		errno = 0;
		long long v = strtoll(line, &end, 10);
		while (*end == '\r' || *end == '\n' || *end == ' ')
			end++;
		if (end == line || *end || errno || v < 0 || v > TRACE_MAX_MS) {
			snprintf(err, errlen, "trace=%s: line %ld: not a millisecond timestamp from 0 to %lld",
				 path, lineno, (long long)TRACE_MAX_MS);
			rc = -1;
		} else if (n && v < ms[n - 1]) {
			snprintf(err, errlen, "trace=%s: line %ld: %lld is before the line above (%lld)", path,
				 lineno, v, (long long)ms[n - 1]);
			rc = -1;
		} else if (n >= TRACE_MAX_LINES) {
			snprintf(err, errlen, "trace=%s: more than %d lines", path, TRACE_MAX_LINES);
			rc = -1;
		} else {
			if (n == cap) {
				cap *= 2;
				ms = realloc(ms, cap * sizeof *ms);
			}
			ms[n++] = v;
		}
	}
	fclose(f);
	if (!rc && (n == 0 || ms[n - 1] == 0)) {
		snprintf(err, errlen, "trace=%s: needs at least one opportunity and a last timestamp above 0",
			 path);
		rc = -1;
	}
	if (rc) {
		free(ms);
		return -1;
	}
	free(c->trace_ms);
	c->trace_ms = ms;
	c->trace_n = (uint32_t)n;
	c->trace_period_ms = ms[n - 1];
	return 0;
}

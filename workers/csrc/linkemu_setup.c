/*
 * linkemu_setup.c: everything around linkemu's packet path (see linkemu.c): errors and
 * allocation, the JSON stats lines, signal handling, the TUN devices in their namespaces,
 * argument and SPEC parsing, the record files and each direction's initial state.
 */
#include "linkemu.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

volatile sig_atomic_t g_stop, g_dump;

void die(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("linkemu: error: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(code);
}

void *xcalloc(size_t n, size_t sz)
{
	void *p = calloc(n, sz);
	if (!p)
		die(EXIT_RUNTIME, "out of memory");
	return p;
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

static const char *const qdisc_names[] = {"fifo", "drophead", "codel", "pie"};

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
		",\"records\":%" PRIu64 ",\"record_errors\":%" PRIu64
		",\"trace_t0_ns\":%lld,\"trace_opportunities\":%" PRIu64
		",\"qdisc\":\"%s\",\"dropped_head\":%" PRIu64 ",\"dropped_aqm\":%" PRIu64
		",\"pie_drop_prob\":%.6f,\"offload\":%d,\"rx_super\":%" PRIu64 ",\"tx_super\":%" PRIu64 "}",
		d->name, d->rx_pkts, d->rx_bytes, d->tx_pkts, d->tx_bytes, d->loss_drops, d->queue_drops,
		d->overflow_drops, d->oversize_drops, d->tx_errors, d->heap_n, d->max_backlog_pkts,
		d->max_backlog_bytes, late_quantile_us(d, 0.5), late_quantile_us(d, 0.99), (double)d->late_max / 1e3,
		d->cfg.prio, d->queue_drops_high, d->pushed_out, d->ring[CLS_HIGH].n, d->ring[CLS_LOW].n,
		d->rx_cls[CLS_HIGH], d->rx_cls[CLS_LOW], d->served_cls[CLS_HIGH], d->served_cls[CLS_LOW],
		d->records, rec_errors, (long long)(d->cfg.trace_n || has_outage(&d->cfg) ? d->tr_t0 : 0),
		d->cfg.trace_n ? d->tr_k : 0, qdisc_names[d->cfg.qdisc], d->head_drops, d->aqm_drops, d->pie_p,
		g_offload, d->rx_super, d->tx_super);
}

void print_stats(dir_t *up, dir_t *down, const char *event)
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

/* Block the signals we handle, so they are only delivered inside ppoll(), which gets
 * *waitmask (the mask from before) to wait with. */
void install_signals(sigset_t *waitmask)
{
	sigset_t block;
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGUSR1);
	sigaddset(&block, SIGHUP);
	sigprocmask(SIG_BLOCK, &block, waitmask);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
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
int open_tun_in_ns(const char *ns, const char *ifname, int mtu, int offload, int home_fd)
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
	ifr.ifr_flags = IFF_TUN | IFF_NO_PI | (offload ? IFF_VNET_HDR : 0);
	strncpy(ifr.ifr_name, ifname, IFNAMSIZ - 1);
	if (ioctl(fd, TUNSETIFF, &ifr) < 0)
		die(errno == EPERM ? EXIT_PERM : errno == EBUSY ? EXIT_RUNTIME : EXIT_NOTUN,
		    "creating TUN %s in %s: %s", ifname, ns, strerror(errno));
	/* Checksum and TCP segmentation offload, as a virtio NIC offers its guest: the sender's
	 * stack then hands over super-packets (linkemu_offload.c cuts them). */
	if (offload && ioctl(fd, TUNSETOFFLOAD, TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6) < 0)
		die(EXIT_NOTUN, "offloads on TUN %s in %s: %s", ifname, ns, strerror(errno));
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
	      "               [--offload 0|1 (1: TSO super-packets, cut here, merged again on write)]\n"
	      "SPEC: comma-separated key=value, keys:\n"
	      "  rate=BITS_PER_S (0 = unlimited)  delay=S  jitter=S  dist=uniform|normal\n"
	      "  reorder=0|1  loss=PERCENT  ge=P:R:H:K (percent, as netem `loss gemodel p r 1-h 1-k`)\n"
	      "  limit=PACKETS  limit_bytes=BYTES (rate queue; default 1000 packets when rate is set)\n"
	      "  prio=0|1 (1: two strict-priority classes, DSCP EF first, sharing the limit; needs rate)\n"
	      "  qdisc=fifo|drophead|codel|pie (the queue; not fifo: needs rate, trace or outage)\n"
	      "  target=S interval=S (CoDel: 0.005, 0.1; PIE: QDELAY_REF 0.015, T_UPDATE 0.015)\n"
	      "  max_burst=S (PIE: 0.15)\n"
	      "  trace=PATH (Mahimahi trace: a 1500-byte opportunity per ms line, looping; not with rate)\n"
	      "  outage=ON:OFF (seconds: a periodic schedule; nothing is served while off; not with trace)\n"
	      "  outages=S:E/S:E/... (seconds from the start: outage windows, once; not with outage, trace)\n"
	      "--records-up PATH, --records-down PATH: one 48-byte record per packet of that direction\n",
	      stderr);
	exit(EXIT_USAGE);
}

/* Parsers return their error in err (and -1) instead of exiting, so that a runtime "set" can
 * refuse a bad spec and keep forwarding; on the command line the error is EXIT_USAGE. */
static int num_or_err(const char *key, const char *v, double lo, double hi, double *out, char *err,
		      size_t errlen)
{
	char *end;
	errno = 0;
	double x = strtod(v, &end);
	if (errno || end == v || *end || !isfinite(x) || x < lo || x > hi) {
		snprintf(err, errlen, "%s=%s: must be a number in [%g, %g]", key, v, lo, hi);
		return -1;
	}
	*out = x;
	return 0;
}

static double parse_num(const char *key, const char *v, double lo, double hi)
{
	char err[256];
	double x = 0;
	if (num_or_err(key, v, lo, hi, &x, err, sizeof err))
		die(EXIT_USAGE, "%s", err);
	return x;
}

#define NUM(key, v, lo, hi, out)                                                                  \
	do {                                                                                      \
		double x_;                                                                        \
		if (num_or_err(key, v, lo, hi, &x_, err, errlen))                                 \
			return -1;                                                                \
		out = x_;                                                                         \
	} while (0)
#define FAIL(...)                                                                                 \
	do {                                                                                      \
		snprintf(err, errlen, __VA_ARGS__);                                               \
		return -1;                                                                        \
	} while (0)

int spec_parse(dir_cfg_t *c, const char *which, char *spec, char *err, size_t errlen)
{
	char *save = NULL;
	for (char *tok = strtok_r(spec, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		if (!eq)
			FAIL("--%s: '%s' is not key=value", which, tok);
		*eq = 0;
		const char *k = tok, *v = eq + 1;
		double x;
		if (!strcmp(k, "rate"))
			NUM(k, v, 0, 1e12, c->rate_bps);
		else if (!strcmp(k, "delay")) {
			NUM(k, v, 0, 60, x);
			c->delay_ns = (int64_t)llround(x * 1e9);
		} else if (!strcmp(k, "jitter")) {
			NUM(k, v, 0, 60, x);
			c->jitter_ns = (int64_t)llround(x * 1e9);
		} else if (!strcmp(k, "dist")) {
			if (!strcmp(v, "uniform"))
				c->dist = DIST_UNIFORM;
			else if (!strcmp(v, "normal"))
				c->dist = DIST_NORMAL;
			else
				FAIL("dist=%s: must be uniform or normal", v);
		} else if (!strcmp(k, "reorder"))
			NUM(k, v, 0, 1, c->reorder);
		else if (!strcmp(k, "loss")) {
			NUM(k, v, 0, 100, x);
			c->loss = x / 100.0;
		} else if (!strcmp(k, "ge")) {
			double g[4];
			char buf[256];
			snprintf(buf, sizeof buf, "%s", v);
			char *s2 = NULL, *part = strtok_r(buf, ":", &s2);
			for (int i = 0; i < 4; i++) {
				if (!part)
					FAIL("ge=%s: needs four percentages P:R:H:K", v);
				NUM("ge", part, 0, 100, g[i]);
				g[i] /= 100.0;
				part = strtok_r(NULL, ":", &s2);
			}
			c->ge = 1;
			c->ge_p = g[0];
			c->ge_r = g[1];
			c->ge_bad_loss = g[2];
			c->ge_good_loss = g[3];
		} else if (!strcmp(k, "limit"))
			NUM(k, v, 0, 1e7, c->limit_pkts);
		else if (!strcmp(k, "limit_bytes"))
			NUM(k, v, 0, 1e11, c->limit_bytes);
		else if (!strcmp(k, "prio"))
			NUM(k, v, 0, 1, c->prio);
		else if (!strcmp(k, "qdisc")) {
			int found = -1;
			for (int i = 0; i < 4; i++)
				if (!strcmp(v, qdisc_names[i]))
					found = i;
			if (found < 0)
				FAIL("qdisc=%s: must be fifo, drophead, codel or pie", v);
			c->qdisc = found;
		} else if (!strcmp(k, "target") || !strcmp(k, "interval") || !strcmp(k, "max_burst")) {
			NUM(k, v, 0.0001, 60, x);
			int64_t ns = (int64_t)llround(x * 1e9);
			if (k[0] == 't')
				c->aqm_target_ns = ns;
			else if (k[0] == 'i')
				c->aqm_interval_ns = ns;
			else
				c->aqm_burst_ns = ns;
		}
		else if (!strcmp(k, "trace")) {
			if (trace_load(c, v, err, errlen))
				return -1;
		} else if (!strcmp(k, "outage")) {
			char buf[128], *colon;
			snprintf(buf, sizeof buf, "%s", v);
			if (!(colon = strchr(buf, ':')))
				FAIL("outage=%s: needs ON:OFF seconds", v);
			*colon = 0;
			double on, off;
			NUM("outage on", buf, 0.001, 86400, on);
			NUM("outage off", colon + 1, 0.001, 86400, off);
			c->on_ns = (int64_t)llround(on * 1e9);
			c->off_ns = (int64_t)llround(off * 1e9);
		} else if (!strcmp(k, "outages")) {
			if (outage_windows_parse(c, v, err, errlen))
				return -1;
		} else
			FAIL("--%s: unknown key '%s'", which, k);
	}
	if (c->trace_n && c->rate_bps > 0)
		FAIL("--%s: give rate or trace, not both (a trace is the link's rate)", which);
	if (c->off_ns && c->win_n)
		FAIL("--%s: give a periodic outage or outage windows, not both", which);
	if (c->trace_n && c->win_n)
		FAIL("--%s: outage windows and a trace cannot be combined (put the outage in the trace)", which);
	if (c->prio && c->win_n)
		FAIL("--%s: prio=1 and outage windows cannot be combined", which);
	if (c->trace_n && c->off_ns)
		FAIL("--%s: an outage schedule and a trace cannot be combined (put the outage in the trace)",
		     which);
	if (c->prio && c->off_ns)
		FAIL("--%s: prio=1 and an outage schedule cannot be combined", which);
	if (c->prio && c->rate_bps <= 0)
		FAIL("--%s: prio=1 needs rate>0 (the priority queue feeds the rate limiter)", which);
	if (c->qdisc != Q_FIFO && c->prio)
		FAIL("--%s: prio=1 has its own drop rule (push-out); qdisc must stay fifo", which);
	if (c->qdisc != Q_FIFO && !has_rate_stage(c))
		FAIL("--%s: qdisc=%s needs a rate, a trace or an outage (the queue is the rate stage's)", which,
		     qdisc_names[c->qdisc]);
	if (c->qdisc != Q_CODEL && c->qdisc != Q_PIE && (c->aqm_target_ns || c->aqm_interval_ns))
		FAIL("--%s: target= and interval= need qdisc=codel or qdisc=pie", which);
	if (c->qdisc != Q_PIE && c->aqm_burst_ns)
		FAIL("--%s: max_burst= needs qdisc=pie", which);
	aqm_defaults(c);
	return 0;
}

static void parse_spec(dir_cfg_t *c, const char *which, char *spec)
{
	char err[512];
	if (spec_parse(c, which, spec, err, sizeof err))
		die(EXIT_USAGE, "%s", err);
}

/* The command line: the options into *o, the SPECs into up/down.  Exits on any error. */
void parse_args(int argc, char **argv, opts_t *o, dir_cfg_t *up, dir_cfg_t *down)
{
	char *upspec = NULL, *downspec = NULL;
	*o = (opts_t){
		.mtu = 1500,
		.seed = 1,
		.rt_prio = 10,
		.spin_ns = 200 * 1000, /* VM wake-up latency is 50-100 us; see docs/emulation.md */
		.max_inflight = DEFAULT_MAX_INFLIGHT,
	};

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help"))
			usage();
		if (i + 1 >= argc)
			usage();
		const char *v = argv[++i];
		if (!strcmp(a, "--client-ns"))
			o->cns = v;
		else if (!strcmp(a, "--server-ns"))
			o->sns = v;
		else if (!strcmp(a, "--client-if"))
			o->cif = v;
		else if (!strcmp(a, "--server-if"))
			o->sif = v;
		else if (!strcmp(a, "--up"))
			upspec = strdup(v);
		else if (!strcmp(a, "--down"))
			downspec = strdup(v);
		else if (!strcmp(a, "--records-up"))
			o->uprec = v;
		else if (!strcmp(a, "--records-down"))
			o->downrec = v;
		else if (!strcmp(a, "--mtu"))
			o->mtu = (int)parse_num("mtu", v, 576, 65000);
		else if (!strcmp(a, "--seed"))
			o->seed = (uint64_t)parse_num("seed", v, 0, 9007199254740992.0);
		else if (!strcmp(a, "--spin-us"))
			o->spin_ns = (int64_t)(parse_num("spin-us", v, 0, 10000) * 1000);
		else if (!strcmp(a, "--rt-prio"))
			o->rt_prio = (int)parse_num("rt-prio", v, 0, 99);
		else if (!strcmp(a, "--batch-us"))
			o->batch_ns = (int64_t)(parse_num("batch-us", v, 0, 10000) * 1000);
		else if (!strcmp(a, "--offload"))
			o->offload = (int)parse_num("offload", v, 0, 1);
		else if (!strcmp(a, "--max-inflight"))
			o->max_inflight = (uint32_t)parse_num("max-inflight", v, CHUNK_SLOTS, 1 << 24);
		else
			die(EXIT_USAGE, "unknown option %s (see --help)", a);
	}
	if (!o->cns || !o->sns || !o->cif || !o->sif)
		usage();
	if (strlen(o->cif) >= IFNAMSIZ || strlen(o->sif) >= IFNAMSIZ)
		die(EXIT_USAGE, "interface names must be shorter than %d characters", IFNAMSIZ);
	if (upspec)
		parse_spec(up, "up", upspec);
	if (downspec)
		parse_spec(down, "down", downspec);
	o->max_inflight = (o->max_inflight + CHUNK_SLOTS - 1) / CHUNK_SLOTS * CHUNK_SLOTS;
}

FILE *open_records(const char *path)
{
	FILE *f = fopen(path, "wbe");
	if (!f)
		die(EXIT_RUNTIME, "packet records %s: %s", path, strerror(errno));
	setvbuf(f, NULL, _IOFBF, 1 << 20);
	return f;
}

/* A rate queue without a limit gets netem's 1000 packets; no queue outgrows the slot pool. */
static void default_limits(dir_cfg_t *c, uint32_t max_slots)
{
	if (has_rate_stage(c) && c->limit_pkts == 0 && c->limit_bytes == 0)
		c->limit_pkts = DEFAULT_LIMIT_PKTS;
	if (c->limit_pkts > (long)max_slots)
		c->limit_pkts = max_slots;
}

void dir_init(dir_t *d, const char *name, uint32_t max_slots, uint64_t seed)
{
	d->name = name;
	d->max_slots = max_slots;
	d->chunks = xcalloc(max_slots / CHUNK_SLOTS + 1, sizeof *d->chunks);
	d->freelist = xcalloc(max_slots + CHUNK_SLOTS, sizeof *d->freelist);
	d->heap = xcalloc(max_slots + CHUNK_SLOTS, sizeof *d->heap);
	d->txq = xcalloc(max_slots, sizeof *d->txq);
	d->late_hist = xcalloc(LATE_BUCKETS, sizeof *d->late_hist);
	if (is_served(&d->cfg)) {
		/* every waiting packet holds a slot, so a ring never holds more than max_slots */
		for (int i = 0; i < 2; i++) {
			d->ring[i].cap = max_slots;
			d->ring[i].q = xcalloc(max_slots, sizeof *d->ring[i].q);
		}
	}
	rng_seed(&d->rng, seed);
	default_limits(&d->cfg, max_slots);
	int64_t t0 = now_ns();
	if (d->cfg.trace_n || has_outage(&d->cfg))
		trace_start(d, t0); /* the trace's (or outage schedule's) time 0: the devices exist */
	aqm_start(d, t0);
}

/* JSON string body: quotes, backslashes and control characters escaped (errors echo input). */
static void json_str(FILE *f, const char *s)
{
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
}

/* One control line from stdin: "set up|down SPEC" replaces that direction's settings from the
 * next packet on (packets already queued or on the delay line keep their timing, as on a real
 * path whose conditions change).  The queue kind cannot change; a new loss model starts in its
 * good state.  Answers one JSON line, with the monotonic time of the change. */
void control_line(dir_t *up, dir_t *down, char *line)
{
	char err[512] = "";
	const char *which = "";
	char *save = NULL, *verb = strtok_r(line, " ", &save), *dname = strtok_r(NULL, " ", &save);
	char *spec = strtok_r(NULL, "", &save);
	dir_t *d = NULL;
	if (!verb || strcmp(verb, "set"))
		snprintf(err, sizeof err, "unknown command '%s' (set up|down SPEC)", verb ? verb : "");
	else if (!dname || (strcmp(dname, "up") && strcmp(dname, "down")))
		snprintf(err, sizeof err, "set: direction must be up or down");
	else {
		which = dname;
		d = !strcmp(dname, "up") ? up : down;
		dir_cfg_t c = {0};
		if (spec_parse(&c, which, spec ? spec : (char[]){""}, err, sizeof err) == 0) {
			if (c.prio != d->cfg.prio)
				snprintf(err, sizeof err, "--%s: prio cannot change while running (%d -> %d)",
					 which, d->cfg.prio, c.prio);
			else if (c.qdisc != d->cfg.qdisc)
				snprintf(err, sizeof err, "--%s: qdisc cannot change while running", which);
			else if ((c.trace_n || d->cfg.trace_n) &&
				 (c.trace_n != d->cfg.trace_n || c.trace_period_ms != d->cfg.trace_period_ms ||
				  memcmp(c.trace_ms, d->cfg.trace_ms, c.trace_n * sizeof *c.trace_ms)))
				snprintf(err, sizeof err, "--%s: the trace cannot change while running", which);
			else {
				if (c.trace_n) { /* the same trace: keep the running one and its position */
					free(c.trace_ms);
					c.trace_ms = d->cfg.trace_ms;
				}
				default_limits(&c, d->max_slots);
				if (c.ge != d->cfg.ge || c.ge_p != d->cfg.ge_p || c.ge_r != d->cfg.ge_r)
					d->ge_bad = 0;
				/* Outage windows count from the link's start, or from this change if the link had
				 * no schedule of its own until now. */
				if (c.win_n && !d->cfg.trace_n && !has_outage(&d->cfg))
					d->tr_t0 = now_ns();
				free(d->cfg.win_start);
				free(d->cfg.win_end);
				d->cfg = c;
				c.trace_ms = NULL;
				c.win_start = c.win_end = NULL;
			}
		}
		if (c.trace_ms && c.trace_ms != d->cfg.trace_ms)
			free(c.trace_ms);
		free(c.win_start);
		free(c.win_end);
	}
	printf("{\"event\": \"set\", \"dir\": \"%s\", \"ok\": %s, \"t_ns\": %lld", which,
	       err[0] ? "false" : "true", (long long)now_ns());
	if (err[0]) {
		fputs(", \"error\": \"", stdout);
		json_str(stdout, err);
		fputc('"', stdout);
	}
	puts("}");
	fflush(stdout);
}

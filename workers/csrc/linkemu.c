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
 * `qdisc=drophead|codel|pie` use the same served queue with one FIFO: drop-head makes room by
 * dropping the oldest waiting packet, CoDel (RFC 8289) drops at dequeue and PIE (RFC 8033) at
 * enqueue (linkemu_aqm.c).  The FIFO path (prio=0, qdisc=fifo) is untouched by them.
 * `--records-up/--records-down PATH` write one
 * 48-byte record per packet (rec_t in linkemu.h; docs/emulation.md has the table).
 *
 * `--offload 1` gives both devices TCP segmentation offload: super-packets are cut into segments
 * that meet the link one by one, and consecutive segments due together are written as one
 * (linkemu_offload.c).  `--batch-us N` lets the thread send at most once per N us while it is
 * writing more than 20000 packets a second, so that due packets leave together (up to N us late)
 * instead of one wake-up each; below that rate every packet leaves at its time.
 *
 * Protocol with the driver: prints `ready` on stdout once both devices exist;
 * SIGUSR1 prints one JSON stats line; SIGTERM/SIGINT, the end of stdin (when
 * stdin is a pipe) or the parent's death make it print the final stats line
 * and exit 0.  A line `set up|down SPEC` on stdin replaces that direction's settings while it
 * runs (the queue kind excepted) and is answered by one JSON line `{"event": "set", ...}` with
 * the time of the change on the monotonic clock of the records, or the error.  The TUN devices are not persistent, so they disappear with the
 * process however it ends.
 *
 * Exit codes: 0 ok, 2 usage, 3 permission (CAP_NET_ADMIN), 4 namespace not
 * found, 5 TUN unavailable, 6 other runtime error.
 *
 * Files: linkemu.h (constants, types, the per packet inline helpers, what the files share),
 * linkemu_queue.c (the packet path per direction: slot pool, delay-line heap, loss and
 * jitter, parsing and records, the FIFO and the served queue, reading and writing packets),
 * linkemu_aqm.c (CoDel's and PIE's drop decisions), linkemu_trace.c (trace links, outages),
 * linkemu_offload.c (--offload: reading, cutting and merging super-packets),
 * linkemu_setup.c (errors, stats lines, signals, TUN devices in namespaces, arguments,
 * per direction initial state) and this file (main: setup order and the event loop).
 */
#include "linkemu.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	opts_t o;
	static dir_t up, down;

	parse_args(argc, argv, &o, &up.cfg, &down.cfg);
	/* Opened before the namespaces are touched, so a bad path fails fast. */
	if (o.uprec)
		up.rec = open_records(o.uprec);
	if (o.downrec)
		down.rec = open_records(o.downrec);
	g_slot_size = ((size_t)o.mtu + 64 + META_BYTES + 63) & ~(size_t)63;
	g_mtu = (uint32_t)o.mtu;
	g_offload = o.offload;
	const int rt_prio = o.rt_prio;
	const int64_t spin_ns = o.spin_ns, batch_ns = o.batch_ns;

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

	sigset_t waitmask;
	install_signals(&waitmask);

	int home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (home < 0)
		die(EXIT_RUNTIME, "/proc/self/ns/net: %s", strerror(errno));
	int cfd = open_tun_in_ns(o.cns, o.cif, o.mtu, o.offload, home);
	int sfd = open_tun_in_ns(o.sns, o.sif, o.mtu, o.offload, home);
	close(home);

	dir_init(&up, "up", o.max_inflight, o.seed * 2 + 0);
	dir_init(&down, "down", o.max_inflight, o.seed * 2 + 1);
	if (o.offload) {
		up.gbuf = xcalloc(1, GBUF_BYTES);
		down.gbuf = xcalloc(1, GBUF_BYTES);
	}
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

	static char cbuf[1 << 20]; /* a control line holds a whole spec, outage windows included */
	size_t clen = 0;

	int64_t win_start = now_ns(), spun = 0, slept = 0, last_send = INT64_MIN / 2, gate = 0;
	uint64_t win_sent = 0;
	int rt_now = rt_ok;
	int spin_on = spin_ns > 0;

	puts("ready");
	fflush(stdout);

	while (!g_stop) {
		int64_t t = now_ns();
		if (is_served(&up.cfg))
			served_service(&up, t);
		if (is_served(&down.cfg))
			served_service(&down, t);
		/* Batching (--batch-us, at high packet rates only): send at most once per batch_ns, so
		 * that packets due close together leave together, with --offload as one super-packet.
		 * Each of them is then up to batch_ns late, and the late_* figures show it. */
		if (t >= last_send + gate) {
			int n = send_due(&up, t) + send_due(&down, t);
			if (n) {
				last_send = t;
				win_sent += n;
			}
		}
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
		if (is_served(&up.cfg)) {
			int64_t s = served_next_start(&up);
			if (s < next)
				next = s;
		}
		if (is_served(&down.cfg)) {
			int64_t s = served_next_start(&down);
			if (s < next)
				next = s;
		}

		if (gate && next != INT64_MAX && next < last_send + gate)
			next = last_send + gate;

		struct timespec ts, *tsp = NULL;
		t = now_ns();
		/* Spin budget: when deadlines come so often that spinning would take more than a
		 * quarter of the time (high packet rates), sleep to the deadline instead.  Otherwise
		 * the thread would be busy all the time, and at real-time priority the kernel's RT
		 * throttling would then stop it for 50 ms every second. */
		if (t - win_start >= SPIN_WINDOW_NS) {
			int64_t win = t - win_start;
			spin_on = spin_ns > 0 && spun < win / 4;
			/* Batch when the last window wrote more than BATCH_MIN_PPS packets per second
			 * (~240 Mbit/s of full-size packets): below that every packet leaves at its time.
			 * Spinning for a batched deadline would only burn the CPU saved. */
			gate = batch_ns > 0 && (int64_t)win_sent * NSEC > BATCH_MIN_PPS * win ? batch_ns : 0;
			if (gate)
				spin_on = 0;
			win_sent = 0;
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
			/* Control lines ("set up|down SPEC"); the end of stdin ends the run. */
			ssize_t n = read(0, cbuf + clen, sizeof cbuf - 1 - clen);
			if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
				break;
			if (n > 0)
				clen += (size_t)n;
			char *nl;
			while ((nl = memchr(cbuf, '\n', clen)) != NULL) {
				*nl = 0;
				control_line(&up, &down, cbuf);
				clen -= (size_t)(nl + 1 - cbuf);
				memmove(cbuf, nl + 1, clen);
			}
			if (clen == sizeof cbuf - 1) { /* a line longer than any spec: refuse it whole */
				cbuf[clen] = 0;
				control_line(&up, &down, (char[]){"overlong"});
				clen = 0;
			}
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

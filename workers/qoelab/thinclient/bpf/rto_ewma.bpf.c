// SPDX-License-Identifier: GPL-2.0
/* Paper 002's Enhancement 1 (notes/seed-thinclient-tcp.md §5.1) as far as Linux lets a BPF program go.
 *
 * A sock_ops program for the sender's cgroup. For each socket whose remote port is cfg.port it keeps
 * the paper's estimator beside Linux's own:
 *   srtt   <- srtt + g (rtt - srtt),      g = 7/8 if rtt >= srtt, else 1/8        (Eqs. 5, 8)
 *   rttvar <- rttvar + 1/4 (|rtt - srtt| - rttvar), srtt before this sample's update (Eq. 6)
 *   RTO_p  =  srtt + 4 rttvar                                                      (Eq. 7)
 * and sets the socket's RTO floor (TCP_BPF_RTO_MIN, microseconds) to
 *   floor  =  clamp(RTO_p - srtt_kernel, cfg.base_us, 200 ms)
 * because Linux's RTO is srtt_kernel + rttvar_kernel with rttvar_kernel held at or above the floor;
 * the kernel rejects a TCP_BPF_RTO_MIN above TCP_RTO_MIN (200 ms), hence the upper clamp (counted).
 * The floor is only what Linux's rttvar decays to: raising it does not raise the RTO (the kernel has
 * no path for that), so `kernel_below` counts the samples after which Linux's RTO stays under ours.
 * Samples arrive once per RTT (BPF_SOCK_OPS_RTT_CB: args[0] = the RTT sample in us, args[1] = the
 * kernel's new srtt in us << 3). First sample, and the first after an idle gap longer than RTO_p:
 * srtt = rtt, rttvar = rtt / 2 (RFC 6298's start; the paper does not state its reset values).
 * docs/thinclient-bpf.md.
 */
#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

/* The two tcp_sock fields the report reads, relocated against the kernel's BTF at load (CO-RE). */
struct tcp_sock {
	__u32 rttvar_us;
} __attribute__((preserve_access_index));

#define SOL_TCP 6
#define RTO_MIN_CAP_US 200000U /* TCP_RTO_MIN: the largest TCP_BPF_RTO_MIN the kernel accepts */

struct config {
	__u32 port;    /* the replay's port: only sockets whose remote port is this */
	__u32 base_us; /* the lowest floor the program sets */
};

struct counters {
	__u64 sockets;        /* sockets the program took on */
	__u64 samples;        /* RTT samples seen */
	__u64 floor_updates;  /* successful TCP_BPF_RTO_MIN calls that changed the floor */
	__u64 floor_capped;   /* samples whose wanted floor was above the kernel's 200 ms cap */
	__u64 resets;         /* idle re-initialisations */
	__u64 setsockopt_failures;
	__u64 cb_flag_failures; /* bpf_sock_ops_cb_flags_set refused */
	__u64 kernel_below;     /* samples after which Linux's RTO (srtt + rttvar) is below the paper's */
};

struct sk_state {
	__u64 last_ns;   /* when the last sample came */
	__u32 srtt8;     /* our srtt, us << 3 */
	__u32 rttvar4;   /* our rttvar, us << 2 */
	__u32 floor_us;  /* the socket's floor: as found at establishment, then as last set */
	__u32 started;   /* 1 once a sample initialised the estimator */
};

/* Per connection (the sender's local port): the last values, for the run's report. */
struct conn_report {
	__u32 samples;
	__u32 mrtt_us;
	__u32 srtt_us;
	__u32 rttvar_us;
	__u32 rto_us;        /* the paper's RTO */
	__u32 kernel_srtt_us;
	__u32 floor_us;
	__u32 resets;
	__u32 kernel_rttvar_us; /* Linux's rttvar after this sample: its RTO is kernel_srtt + this */
	__u32 kernel_below;     /* samples after which Linux's RTO was below the paper's */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct config);
} config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct counters);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct sk_state);
} state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct conn_report);
} conns SEC(".maps");

static __always_inline struct counters *ctr(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&counters, &zero);
}

static __always_inline void on_established(struct bpf_sock_ops *skops, struct config *cfg, struct counters *c)
{
	struct sk_state *st;
	int now_us = 0;

	if (bpf_ntohl(skops->remote_port) != cfg->port || !skops->sk)
		return;
	st = bpf_sk_storage_get(&state, skops->sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!st)
		return;
	if (bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags | BPF_SOCK_OPS_RTT_CB_FLAG)) {
		__sync_fetch_and_add(&c->cb_flag_failures, 1);
		return;
	}
	/* The floor the socket has now (sysctl tcp_rto_min_us), so that setting the same value is no update. */
	if (bpf_getsockopt(skops, SOL_TCP, TCP_BPF_RTO_MIN, &now_us, sizeof(now_us)) == 0 && now_us > 0)
		st->floor_us = now_us;
	__sync_fetch_and_add(&c->sockets, 1);
}

static __always_inline void on_rtt(struct bpf_sock_ops *skops, struct config *cfg, struct counters *c)
{
	struct conn_report rep = {}, *old;
	struct sk_state *st;
	struct tcp_sock *tp;
	struct bpf_sock *sk = skops->sk;
	__u32 port = skops->local_port;
	__u64 now = bpf_ktime_get_ns();
	__u32 rtt = (__u32)skops->args[0];
	__u32 ksrtt = skops->args[1] >> 3;
	__u32 srtt, rttvar, rto, err;
	__s64 want;
	int floor;

	if (!sk)
		return;
	st = bpf_sk_storage_get(&state, sk, 0, 0);
	if (!st || rtt == 0)
		return;
	__sync_fetch_and_add(&c->samples, 1);
	old = bpf_map_lookup_elem(&conns, &port);
	if (old)
		rep = *old;

	if (st->started) {
		srtt = st->srtt8 >> 3;
		rto = srtt + st->rttvar4; /* srtt + 4 * rttvar: rttvar4 is rttvar << 2 */
		if (now - st->last_ns > (__u64)rto * 1000) {
			st->started = 0; /* idle longer than our RTO: start again from this sample */
			__sync_fetch_and_add(&c->resets, 1);
			rep.resets++;
		}
	}
	if (!st->started) {
		st->srtt8 = rtt << 3;
		st->rttvar4 = (rtt >> 1) << 2;
		st->started = 1;
	} else {
		srtt = st->srtt8 >> 3;
		err = rtt >= srtt ? rtt - srtt : srtt - rtt;
		/* Eq. 6 with the srtt from before this sample (as RFC 6298 orders it) */
		st->rttvar4 = st->rttvar4 - (st->rttvar4 >> 2) + err;
		if (rtt >= srtt)
			st->srtt8 = st->srtt8 + (((rtt << 3) - st->srtt8) >> 3) * 7; /* g = 7/8 */
		else
			st->srtt8 = st->srtt8 - ((st->srtt8 - (rtt << 3)) >> 3); /* g = 1/8 */
	}
	st->last_ns = now;
	srtt = st->srtt8 >> 3;
	rttvar = st->rttvar4 >> 2;
	rto = srtt + st->rttvar4;

	want = (__s64)rto - (__s64)ksrtt;
	if (want > RTO_MIN_CAP_US) {
		__sync_fetch_and_add(&c->floor_capped, 1);
		want = RTO_MIN_CAP_US;
	}
	if (want < cfg->base_us)
		want = cfg->base_us;
	floor = (int)want;
	if ((__u32)floor != st->floor_us) {
		if (bpf_setsockopt(skops, SOL_TCP, TCP_BPF_RTO_MIN, &floor, sizeof(floor))) {
			__sync_fetch_and_add(&c->setsockopt_failures, 1);
		} else {
			st->floor_us = floor;
			__sync_fetch_and_add(&c->floor_updates, 1);
		}
	}

	rep.samples++;
	rep.mrtt_us = rtt;
	rep.srtt_us = srtt;
	rep.rttvar_us = rttvar;
	rep.rto_us = rto;
	rep.kernel_srtt_us = ksrtt;
	rep.floor_us = st->floor_us;
	tp = bpf_skc_to_tcp_sock(sk);
	if (tp) {
		rep.kernel_rttvar_us = tp->rttvar_us;
		if (ksrtt + tp->rttvar_us < rto) {
			rep.kernel_below++;
			__sync_fetch_and_add(&c->kernel_below, 1);
		}
	}
	bpf_map_update_elem(&conns, &port, &rep, BPF_ANY);
}

SEC("sockops")
int rto_ewma(struct bpf_sock_ops *skops)
{
	__u32 zero = 0;
	struct config *cfg = bpf_map_lookup_elem(&config, &zero);
	struct counters *c = ctr();

	if (!cfg || !c || cfg->port == 0)
		return 1;
	switch (skops->op) {
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
	case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB:
		on_established(skops, cfg, c);
		break;
	case BPF_SOCK_OPS_RTT_CB:
		on_rtt(skops, cfg, c);
		break;
	}
	return 1;
}

char LICENSE[] SEC("license") = "GPL";

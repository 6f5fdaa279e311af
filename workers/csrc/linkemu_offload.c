/*
 * linkemu_offload.c: `--offload 1`, segmentation offload on both TUN devices (see linkemu.c).
 *
 * Without it every packet costs two system calls, and the write runs the receiving namespace's
 * whole IP and TCP input in linkemu's thread (a TUN write delivers synchronously), so at
 * 1 Gbit/s most of a core went to per-packet kernel work.  With it the devices carry a
 * virtio-net header (IFF_VNET_HDR) and advertise checksum and TCP segmentation offload
 * (TUNSETOFFLOAD), as a virtio NIC does to its guest:
 *
 * - Reading: the sender's TCP hands over super-packets of up to 64 KB.  Each is split here into
 *   the MTU-sized segments its NIC would have sent (the same headers, sequence numbers, IPv4
 *   IDs and flags as the kernel's own software segmentation), and every segment goes through
 *   the link on its own: loss, queue and rate stay per packet, records too.
 * - Writing: segments that are due together and are consecutive pieces of one super-packet
 *   leave in one write as one super-packet again (one pass through the receiver's stack, as
 *   GRO gives a real NIC's receiver); anything else is written as it came.
 *
 * Checksums stay "partial" (VIRTIO_NET_HDR_F_NEEDS_CSUM): the TCP checksum field holds the
 * pseudo-header sum for the packet's own length, which is what the kernel expects wherever it
 * may still have to complete or re-segment the packet (a forwarding namespace, a bridge).
 */
#include "linkemu.h"

#include <errno.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define TCP_FIN 0x01
#define TCP_PSH 0x08
#define TCP_CWR 0x80
#define MAX_COALESCE 64

int g_offload;

static inline uint16_t get16(const unsigned char *p) { return (uint16_t)(p[0] << 8 | p[1]); }

static inline void put16(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 8);
	p[1] = (unsigned char)v;
}

static inline uint32_t fold(uint32_t s)
{
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return s;
}

/* One's complement sum of n bytes as big-endian 16-bit words (n even). */
static uint32_t sum16(const unsigned char *p, size_t n)
{
	uint32_t s = 0;
	for (size_t i = 0; i + 1 < n; i += 2)
		s += get16(p + i);
	return s;
}

/* Rewrite the IP and TCP headers at p (IP header at 0, TCP at thoff) for a packet of len bytes:
 * the IP length, the IPv4 header checksum and the TCP pseudo-header sum.  The TCP checksum
 * itself stays partial: the field holds the pseudo-header sum, not complemented, as the kernel
 * leaves it for offload. */
static void set_lengths(unsigned char *p, uint32_t thoff, uint32_t len)
{
	uint32_t tcplen = len - thoff, s;
	if (p[0] >> 4 == 4) {
		put16(p + 2, len);
		put16(p + 10, 0);
		put16(p + 10, ~fold(sum16(p, (size_t)(p[0] & 0x0f) * 4)) & 0xffff);
		s = sum16(p + 12, 8);
	} else {
		put16(p + 4, len - 40);
		s = sum16(p + 8, 32);
	}
	put16(p + thoff + 16, fold(s + 6 /* IPPROTO_TCP */ + tcplen));
}

/* Whether a read super-packet has the shape this file knows how to cut: TCP over IPv4 or IPv6,
 * partial checksum at the TCP header, segments that fit a slot.  *thoff and *hlen get the TCP
 * header's offset and the length of all headers. */
static int splittable(const struct virtio_net_hdr *vh, const unsigned char *p, uint32_t n, uint32_t *thoff,
		      uint32_t *hlen)
{
	int type = vh->gso_type & ~VIRTIO_NET_HDR_GSO_ECN;
	if (!(vh->flags & VIRTIO_NET_HDR_F_NEEDS_CSUM) || vh->csum_offset != 16 || vh->gso_size == 0)
		return 0;
	if (!((type == VIRTIO_NET_HDR_GSO_TCPV4 && n >= 40 && p[0] >> 4 == 4) ||
	      (type == VIRTIO_NET_HDR_GSO_TCPV6 && n >= 60 && p[0] >> 4 == 6)))
		return 0;
	*thoff = vh->csum_start;
	if (*thoff + 20 > n)
		return 0;
	*hlen = *thoff + (uint32_t)(p[*thoff + 12] >> 4) * 4;
	return *hlen <= n && *hlen + vh->gso_size <= slot_room();
}

/* Cut the super-packet in d->gbuf (n bytes, read at t) into segments and pass each to the link. */
static void split(dir_t *d, const struct virtio_net_hdr *vh, uint32_t n, int64_t t)
{
	const unsigned char *p = d->gbuf;
	uint32_t thoff, hlen;
	if (!splittable(vh, p, n, &thoff, &hlen)) {
		dropped_unqueued(d, p, n, t, &d->oversize_drops);
		return;
	}
	uint32_t mss = vh->gso_size, payload = n - hlen;
	uint32_t nseg = payload ? (payload + mss - 1) / mss : 1;
	uint32_t seq0 = (uint32_t)p[thoff + 4] << 24 | (uint32_t)p[thoff + 5] << 16 |
			(uint32_t)p[thoff + 6] << 8 | p[thoff + 7];
	uint16_t id0 = p[0] >> 4 == 4 ? get16(p + 4) : 0;
	uint8_t flags = p[thoff + 13];
	uint32_t group = ++d->gso_group ? d->gso_group : ++d->gso_group; /* 0 means "no group" */
	d->rx_super++;
	for (uint32_t i = 0; i < nseg; i++) {
		uint32_t plen = i + 1 < nseg ? mss : payload - i * mss, len = hlen + plen;
		uint32_t slot;
		if (slot_alloc(d, &slot) < 0) {
			d->rx_pkts++;
			d->rx_bytes += len;
			d->overflow_drops++;
			continue;
		}
		unsigned char *s = slot_ptr(d, slot);
		memcpy(s, p, hlen);
		memcpy(s + hlen, p + hlen + (size_t)i * mss, plen);
		uint32_t seq = seq0 + i * mss;
		s[thoff + 4] = (unsigned char)(seq >> 24);
		s[thoff + 5] = (unsigned char)(seq >> 16);
		s[thoff + 6] = (unsigned char)(seq >> 8);
		s[thoff + 7] = (unsigned char)seq;
		/* As tcp_gso_segment: FIN and PSH stay on the last segment, CWR on the first. */
		s[thoff + 13] = (uint8_t)(flags & ~((i + 1 < nseg ? TCP_FIN | TCP_PSH : 0) | (i ? TCP_CWR : 0)));
		if (p[0] >> 4 == 4)
			put16(s + 4, (uint32_t)(id0 + i)); /* as the kernel's TSO: one ID per segment */
		set_lengths(s, thoff, len);
		meta_t *m = slot_meta(slot_ptr(d, slot));
		*m = (meta_t){
			.vh = {.flags = VIRTIO_NET_HDR_F_NEEDS_CSUM,
			       .gso_type = VIRTIO_NET_HDR_GSO_NONE,
			       .csum_start = (uint16_t)thoff,
			       .csum_offset = 16},
			.group = group,
			.idx = (uint16_t)i,
			.hlen = (uint16_t)hlen,
			.mss = (uint16_t)mss,
		};
		on_arrival(d, slot, len, t);
	}
}

/* Read what the kernel has queued on d->in_fd (bounded batch), with virtio-net headers. */
void offload_read_side(dir_t *d)
{
	for (int i = 0; i < READ_BATCH; i++) {
		struct virtio_net_hdr vh;
		struct iovec iov[2] = {{&vh, sizeof vh}, {d->gbuf, GBUF_BYTES}};
		ssize_t r = readv(d->in_fd, iov, 2);
		if (r <= 0) {
			if (r < 0 && errno != EAGAIN && errno != EINTR)
				die(EXIT_RUNTIME, "read from %s TUN: %s", d->name, strerror(errno));
			return;
		}
		if ((size_t)r < sizeof vh)
			continue;
		uint32_t n = (uint32_t)(r - (ssize_t)sizeof vh);
		int64_t t = now_ns();
		if (vh.gso_type != VIRTIO_NET_HDR_GSO_NONE) {
			split(d, &vh, n, t);
			continue;
		}
		uint32_t slot;
		if (n > slot_room() || slot_alloc(d, &slot) < 0) {
			dropped_unqueued(d, d->gbuf, n, t, n > slot_room() ? &d->oversize_drops : &d->overflow_drops);
			continue;
		}
		/* One copy of a small packet buys reading everything into one buffer. */
		memcpy(slot_ptr(d, slot), d->gbuf, n);
		*slot_meta(slot_ptr(d, slot)) = (meta_t){.vh = vh};
		on_arrival(d, slot, n, t);
	}
}

/* Whether the packet q can follow the run ending with packet `last` (idx) in one write. */
static inline int follows(dir_t *d, const meta_t *first, uint16_t last_idx, const pkt_t *q, uint32_t total)
{
	const meta_t *m = slot_meta(slot_ptr(d, q->slot));
	return m->group == first->group && m->idx == last_idx + 1 && total + q->len - first->hlen <= 65535;
}

/* Write the due packet at the top of the heap, with the consecutive segments of its super-packet
 * that are due too, in one write.  Returns how many packets left. */
int offload_send(dir_t *d, int64_t t)
{
	pkt_t run[MAX_COALESCE];
	struct iovec iov[MAX_COALESCE + 1];
	run[0] = heap_pop(d);
	unsigned char *p0 = slot_ptr(d, run[0].slot);
	meta_t *m0 = slot_meta(p0);
	uint32_t k = 1, total = run[0].len;
	if (m0->group) {
		uint16_t last = m0->idx;
		while (k < MAX_COALESCE && d->heap_n > 0 && d->heap[0].depart <= t &&
		       follows(d, m0, last, &d->heap[0], total)) {
			run[k] = heap_pop(d);
			total += run[k].len - m0->hlen;
			last++;
			k++;
		}
	}
	struct virtio_net_hdr vh = m0->vh;
	iov[0] = (struct iovec){&vh, sizeof vh};
	iov[1] = (struct iovec){p0, run[0].len};
	if (k > 1) {
		unsigned char *pl = slot_ptr(d, run[k - 1].slot);
		uint32_t thoff = m0->vh.csum_start, hlen = m0->hlen;
		/* The first segment's headers describe the whole run: its length, the last one's FIN
		 * and PSH.  The slot is freed after the write, so changing it in place is safe. */
		p0[thoff + 13] |= pl[thoff + 13] & (TCP_FIN | TCP_PSH);
		set_lengths(p0, thoff, total);
		vh.gso_type = p0[0] >> 4 == 4 ? VIRTIO_NET_HDR_GSO_TCPV4 : VIRTIO_NET_HDR_GSO_TCPV6;
		vh.gso_size = m0->mss;
		vh.hdr_len = (uint16_t)hlen;
		for (uint32_t i = 1; i < k; i++)
			iov[i + 1] = (struct iovec){slot_ptr(d, run[i].slot) + hlen, run[i].len - hlen};
		d->tx_super++;
	}
	int64_t now = now_ns();
	ssize_t w = writev(d->out_fd, iov, (int)k + 1);
	for (uint32_t i = 0; i < k; i++)
		sent(d, &run[i], now, w >= 0);
	return (int)k;
}

/* vose-pair: the per-record work of an emulated offload device (thesis 000 ch. 3, VOSE).
 * The primitives (prims.c) and the sender/receiver/calibration program (pair.c) share this. */
#ifndef QOELAB_VOSE_H
#define QOELAB_VOSE_H

#include <stddef.h>
#include <stdint.h>

/* The pieces of per-record processing a device may take over. */
enum { P_CSUM = 1, P_SHA1 = 2, P_AES = 4, P_CBC = 8 };
#define P_IPSEC (P_SHA1 | P_AES | P_CBC)
#define TRAILER 16 /* ICV (12 bytes, HMAC-SHA1-96) + Internet checksum (2) + 2 spare */
#define ICV_LEN 12

struct device {
  const char *name;
  unsigned workload; /* what the record costs in software */
  unsigned offload;  /* what the device takes over */
};
extern const struct device DEVICES[];
const struct device *device_by_name(const char *name);

/* How each piece of one record is done: in software, with the CPU's accelerated instruction, or
 * skipped (virtually offloaded: a stub both ends agree on). */
struct work {
  unsigned sw, hw;  /* pieces done in software / by the accelerated primitive */
  unsigned workload;
  size_t record;    /* bytes on the wire, trailer included */
};

/* Timebase: the TSC when it is invariant, else CLOCK_MONOTONIC_RAW in ns. */
struct timebase {
  int tsc;          /* 1 = TSC */
  int invariant;    /* CPUID 80000007h EDX bit 8 */
  double ticks_per_ns;
};
extern struct timebase TB;
void timebase_init(void);
uint64_t now_ticks(void);
/* Spin until `ticks` after `start`, re-reading the clock each iteration (the loop the thesis' Fig.
 * 3.4 meant); returns the iterations, so the granularity can be measured, and the last reading. */
uint64_t busy_wait(uint64_t start, uint64_t ticks, uint64_t *end, uint64_t *stolen);
/* A gap between two clock reads of the spin longer than this is an interruption (set by pair.c
 * from the measured iteration time; UINT64_MAX = never). */
extern uint64_t STOLEN_GAP_TICKS;
void sleep_wait(uint64_t ticks);

void prims_init(void);
int aesni_available(void);
int aes_selftest(char *why, size_t n);
void fill_pattern(uint8_t *pattern, size_t n, uint32_t seed);
/* Sender: build nothing, just transform an already stamped record in place. */
void work_send(const struct work *w, uint8_t *rec, uint64_t seq);
/* Receiver: verify and undo in place; 0 = ok, else which check failed (P_CSUM, P_SHA1) or -1 when
 * the plaintext differs from what the sender stamped. */
int work_recv(const struct work *w, uint8_t *rec, uint64_t seq, const uint8_t *pattern);
void stamp(uint8_t *rec, size_t plen, const uint8_t *pattern, uint64_t seq);
uint16_t inet_csum(const uint8_t *p, size_t n);

#endif

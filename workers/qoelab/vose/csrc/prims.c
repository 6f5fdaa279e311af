/* The primitives of one record: RFC 1071 checksum, HMAC-SHA1-96, AES-128 with the block cipher
 * and the CBC chaining kept apart (so a device can take one without the other, as the thesis
 * replaced aes_encrypt and crypto_cbc_encrypt separately), the clocks and the busy wait.
 *
 * Software AES is OpenSSL's table implementation (AES_encrypt, no AES-NI); hardware AES is the
 * AES-NI instructions. SHA-1 is OpenSSL's: software or SHA-NI is chosen for the whole process by
 * OPENSSL_ia32cap, which pair.c sets before libcrypto starts. */
#define OPENSSL_SUPPRESS_DEPRECATED /* AES_encrypt/SHA1_*: the only per-block/per-call entry points */
#include "vose.h"

#include <cpuid.h>
#include <immintrin.h>
#include <openssl/aes.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <x86intrin.h>

const struct device DEVICES[] = {
    {"checksum", P_CSUM, P_CSUM},
    {"sha1_only", P_IPSEC, P_SHA1},
    {"aes_only", P_IPSEC, P_AES},
    {"aes_cbc", P_IPSEC, P_AES | P_CBC},
    {"sha1_aes", P_IPSEC, P_SHA1 | P_AES},
    {"sha1_aes_cbc", P_IPSEC, P_IPSEC},
    {NULL, 0, 0},
};

const struct device *device_by_name(const char *name) {
  for (const struct device *d = DEVICES; d->name; d++)
    if (strcmp(d->name, name) == 0) return d;
  return NULL;
}

/* ---- clocks ---- */

struct timebase TB;

static uint64_t raw_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t tsc(void) {
  _mm_lfence();
  uint64_t t = __rdtsc();
  _mm_lfence();
  return t;
}

uint64_t now_ticks(void) { return TB.tsc ? tsc() : raw_ns(); }

void timebase_init(void) {
  unsigned a, b, c, d;
  TB.invariant = __get_cpuid(0x80000007, &a, &b, &c, &d) && (d & (1u << 8));
  TB.tsc = TB.invariant;
  if (!TB.tsc) {
    TB.ticks_per_ns = 1.0;
    return;
  }
  /* The TSC rate against CLOCK_MONOTONIC_RAW over 50 ms (the kernel does not export tsc_khz). */
  uint64_t n0 = raw_ns(), t0 = tsc(), n1;
  do n1 = raw_ns();
  while (n1 - n0 < 50000000ull);
  TB.ticks_per_ns = (double)(tsc() - t0) / (double)(n1 - n0);
}

uint64_t STOLEN_GAP_TICKS = UINT64_MAX;

uint64_t busy_wait(uint64_t start, uint64_t ticks, uint64_t *end, uint64_t *stolen) {
  uint64_t iters = 0, deadline = start + ticks, prev = start, now;
  while ((int64_t)((now = now_ticks()) - deadline) < 0) {
    /* An interrupt (RPS's softirq, a timer) took the core: the device's work would have waited
     * for it, so the deadline moves by the gap. Without this a wall-clock deadline hides the
     * interrupt inside the wait and the emulated end comes out faster than the real one. */
    if (now - prev > STOLEN_GAP_TICKS) {
      deadline += now - prev;
      *stolen += now - prev;
    }
    prev = now;
    iters++;
  }
  *end = now;
  return iters;
}

void sleep_wait(uint64_t ticks) {
  uint64_t ns = (uint64_t)((double)ticks / TB.ticks_per_ns);
  struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
  clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
}

/* ---- RFC 1071 Internet checksum: 32-bit words summed into 64 bits, folded at the end ---- */

uint16_t inet_csum(const uint8_t *p, size_t n) {
  uint64_t sum = 0;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t v;
    memcpy(&v, p, 8);
    sum += (v & 0xffffffffu) + (v >> 32);
  }
  for (; n >= 2; p += 2, n -= 2) {
    uint16_t v;
    memcpy(&v, p, 2);
    sum += v;
  }
  if (n) sum += *p;
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return (uint16_t)~sum;
}

/* ---- keys: fixed, because the lab measures cost, not secrecy ---- */

static const uint8_t AES_KEY_BYTES[16] = {0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
                                          0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f};
static AES_KEY sw_enc, sw_dec;
static __m128i hw_enc[11], hw_dec[11];
static SHA_CTX hmac_inner, hmac_outer;
static int have_aesni;

int aesni_available(void) { return have_aesni; }

__attribute__((target("aes,sse2"))) static __m128i expand(__m128i key, __m128i gen) {
  gen = _mm_shuffle_epi32(gen, 0xff);
  key = _mm_xor_si128(key, _mm_slli_si128(key, 4));
  key = _mm_xor_si128(key, _mm_slli_si128(key, 4));
  key = _mm_xor_si128(key, _mm_slli_si128(key, 4));
  return _mm_xor_si128(key, gen);
}

#define EXPAND(i, rcon) hw_enc[i] = expand(hw_enc[i - 1], _mm_aeskeygenassist_si128(hw_enc[i - 1], rcon))

__attribute__((target("aes,sse2"))) static void aesni_keys(void) {
  hw_enc[0] = _mm_loadu_si128((const __m128i *)AES_KEY_BYTES);
  EXPAND(1, 0x01); EXPAND(2, 0x02); EXPAND(3, 0x04); EXPAND(4, 0x08); EXPAND(5, 0x10);
  EXPAND(6, 0x20); EXPAND(7, 0x40); EXPAND(8, 0x80); EXPAND(9, 0x1b); EXPAND(10, 0x36);
  hw_dec[0] = hw_enc[10];
  for (int i = 1; i < 10; i++) hw_dec[i] = _mm_aesimc_si128(hw_enc[10 - i]);
  hw_dec[10] = hw_enc[0];
}

__attribute__((target("aes,sse2"))) static inline __m128i aesni_enc(__m128i b) {
  b = _mm_xor_si128(b, hw_enc[0]);
  for (int r = 1; r < 10; r++) b = _mm_aesenc_si128(b, hw_enc[r]);
  return _mm_aesenclast_si128(b, hw_enc[10]);
}

__attribute__((target("aes,sse2"))) static inline __m128i aesni_dec(__m128i b) {
  b = _mm_xor_si128(b, hw_dec[0]);
  for (int r = 1; r < 10; r++) b = _mm_aesdec_si128(b, hw_dec[r]);
  return _mm_aesdeclast_si128(b, hw_dec[10]);
}

void prims_init(void) {
  unsigned a, b, c, d;
  have_aesni = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_AES);
  AES_set_encrypt_key(AES_KEY_BYTES, 128, &sw_enc);
  AES_set_decrypt_key(AES_KEY_BYTES, 128, &sw_dec);
  if (have_aesni) aesni_keys();
  /* HMAC (RFC 2104) with the key's inner and outer pads absorbed once. */
  uint8_t ipad[64], opad[64];
  for (int i = 0; i < 64; i++) {
    uint8_t k = i < 20 ? (uint8_t)(0xa0 + i) : 0;
    ipad[i] = k ^ 0x36;
    opad[i] = k ^ 0x5c;
  }
  SHA1_Init(&hmac_inner);
  SHA1_Update(&hmac_inner, ipad, 64);
  SHA1_Init(&hmac_outer);
  SHA1_Update(&hmac_outer, opad, 64);
}

static void hmac_sha1_96(const uint8_t *p, size_t n, uint8_t icv[ICV_LEN]) {
  uint8_t md[SHA_DIGEST_LENGTH];
  SHA_CTX c = hmac_inner;
  SHA1_Update(&c, p, n);
  SHA1_Final(md, &c);
  c = hmac_outer;
  SHA1_Update(&c, md, sizeof md);
  SHA1_Final(md, &c);
  memcpy(icv, md, ICV_LEN);
}

int aes_selftest(char *why, size_t n) {
  /* FIPS-197 appendix C.1 */
  static const uint8_t pt[16] = {0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
                                 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff};
  static const uint8_t ct[16] = {0x69, 0xc4, 0xe0, 0xd8, 0x6a, 0x7b, 0x04, 0x30,
                                 0xd8, 0xcd, 0xb7, 0x80, 0x70, 0xb4, 0xc5, 0x5a};
  uint8_t out[16];
  AES_encrypt(pt, out, &sw_enc);
  if (memcmp(out, ct, 16)) return snprintf(why, n, "software AES-128 fails FIPS-197 C.1"), -1;
  AES_decrypt(ct, out, &sw_dec);
  if (memcmp(out, pt, 16)) return snprintf(why, n, "software AES-128 decryption fails FIPS-197 C.1"), -1;
  if (!have_aesni) return 0;
  __m128i b = aesni_enc(_mm_loadu_si128((const __m128i *)pt));
  _mm_storeu_si128((__m128i *)out, b);
  if (memcmp(out, ct, 16)) return snprintf(why, n, "AES-NI AES-128 fails FIPS-197 C.1"), -1;
  _mm_storeu_si128((__m128i *)out, aesni_dec(_mm_loadu_si128((const __m128i *)ct)));
  if (memcmp(out, pt, 16)) return snprintf(why, n, "AES-NI AES-128 decryption fails FIPS-197 C.1"), -1;
  return 0;
}

/* ---- one record ---- */

void fill_pattern(uint8_t *pattern, size_t n, uint32_t seed) {
  uint64_t x = 0x9e3779b97f4a7c15ull ^ seed; /* splitmix64: any fixed bytes will do */
  for (size_t i = 0; i < n; i++) {
    x += 0x9e3779b97f4a7c15ull;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    pattern[i] = (uint8_t)(z ^ (z >> 31));
  }
}

void stamp(uint8_t *rec, size_t plen, const uint8_t *pattern, uint64_t seq) {
  memcpy(rec, pattern, plen);
  memcpy(rec, &seq, sizeof seq);
}

static inline __m128i iv_for(uint64_t seq) { return _mm_set_epi64x((long long)~seq, (long long)seq); }

/* CBC encryption with the two pieces apart: chaining = XOR with the previous ciphertext block,
 * block cipher = AES. A skipped cipher leaves XOR chaining; a skipped chaining leaves ECB. */
__attribute__((target("aes,sse2"))) static void encrypt(const struct work *w, uint8_t *p, size_t nblk,
                                                         uint64_t seq) {
  unsigned on = w->sw | w->hw;
  __m128i prev = iv_for(seq);
  for (size_t i = 0; i < nblk; i++, p += 16) {
    __m128i b = _mm_loadu_si128((const __m128i *)p);
    if (on & P_CBC) b = _mm_xor_si128(b, prev);
    if (w->hw & P_AES) {
      b = aesni_enc(b);
    } else if (w->sw & P_AES) {
      uint8_t t[16];
      _mm_storeu_si128((__m128i *)t, b);
      AES_encrypt(t, t, &sw_enc);
      b = _mm_loadu_si128((const __m128i *)t);
    }
    _mm_storeu_si128((__m128i *)p, b);
    prev = b;
  }
}

__attribute__((target("aes,sse2"))) static void decrypt(const struct work *w, uint8_t *p, size_t nblk,
                                                         uint64_t seq) {
  unsigned on = w->sw | w->hw;
  __m128i prev = iv_for(seq);
  for (size_t i = 0; i < nblk; i++, p += 16) {
    __m128i c = _mm_loadu_si128((const __m128i *)p), b = c;
    if (w->hw & P_AES) {
      b = aesni_dec(b);
    } else if (w->sw & P_AES) {
      uint8_t t[16];
      _mm_storeu_si128((__m128i *)t, b);
      AES_decrypt(t, t, &sw_dec);
      b = _mm_loadu_si128((const __m128i *)t);
    }
    if (on & P_CBC) b = _mm_xor_si128(b, prev);
    _mm_storeu_si128((__m128i *)p, b);
    prev = c;
  }
}

/* Encrypt-then-MAC, as ESP does: cipher over the payload, ICV over the ciphertext, then the
 * checksum (the checksum workload has no cipher or ICV). The payload's tail that is not a whole
 * AES block stays clear. */
void work_send(const struct work *w, uint8_t *rec, uint64_t seq) {
  size_t plen = w->record - TRAILER;
  uint8_t *tr = rec + plen;
  unsigned on = w->sw | w->hw;
  memset(tr, 0, TRAILER); /* a skipped piece leaves its stub: zeros */
  if (on & (P_AES | P_CBC)) encrypt(w, rec, plen / 16, seq);
  if (on & P_SHA1) hmac_sha1_96(rec, plen, tr);
  if (on & P_CSUM) {
    uint16_t c = inet_csum(rec, plen);
    memcpy(tr + ICV_LEN, &c, 2);
  }
}

int work_recv(const struct work *w, uint8_t *rec, uint64_t seq, const uint8_t *pattern) {
  size_t plen = w->record - TRAILER;
  uint8_t *tr = rec + plen;
  unsigned on = w->sw | w->hw;
  uint16_t c = 0;
  if (on & P_CSUM) c = inet_csum(rec, plen);
  if (memcmp(&c, tr + ICV_LEN, 2)) return P_CSUM;
  uint8_t icv[ICV_LEN] = {0};
  if (on & P_SHA1) hmac_sha1_96(rec, plen, icv);
  if (memcmp(icv, tr, ICV_LEN)) return P_SHA1;
  if (on & (P_AES | P_CBC)) decrypt(w, rec, plen / 16, seq);
  if (!pattern) return 0;
  uint64_t got;
  memcpy(&got, rec, sizeof got);
  if (got != seq || memcmp(rec + 8, pattern + 8, plen - 8)) return -1;
  return 0;
}

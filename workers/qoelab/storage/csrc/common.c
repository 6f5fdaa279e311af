/* storage-iobench: time, option parsing, one-line JSON, the file-set layout, cache drops. */
#include "iobench.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t real_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void usage_fail(const char *fmt, ...) {
  va_list ap;
  fputs(PROG ": ", stderr);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  exit(2);
}

/* Bytes with an optional binary suffix: 4096, 4K, 4KiB, 16M, 2G. */
uint64_t opt_size(const char *name, const char *v, uint64_t lo, uint64_t hi) {
  char *end;
  errno = 0;
  if (!v || !*v || *v == '-') goto bad;
  unsigned long long x = strtoull(v, &end, 10);
  if (errno || end == v) goto bad;
  uint64_t mul = 1;
  switch (*end) {
  case 'k': case 'K': mul = 1ull << 10; end++; break;
  case 'm': case 'M': mul = 1ull << 20; end++; break;
  case 'g': case 'G': mul = 1ull << 30; end++; break;
  default: break;
  }
  if (mul > 1 && (strcmp(end, "iB") == 0 || strcmp(end, "B") == 0)) end += strlen(end);
  if (*end || (x && mul > UINT64_MAX / x)) goto bad;
  x *= mul;
  if (x < lo || x > hi)
    usage_fail("%s: %llu..%llu bytes, got %s", name, (unsigned long long)lo, (unsigned long long)hi, v);
  return x;
bad:
  usage_fail("%s: a size in bytes (e.g. 4096, 16K, 1M), got '%s'", name, v ? v : "");
}

long opt_int(const char *name, const char *v, long lo, long hi) {
  char *end;
  errno = 0;
  long x = v ? strtol(v, &end, 10) : 0;
  if (!v || errno || end == v || *end) usage_fail("%s: an integer %ld..%ld, got '%s'", name, lo, hi, v ? v : "");
  if (x < lo || x > hi) usage_fail("%s: %ld..%ld, got %s", name, lo, hi, v);
  return x;
}

double opt_seconds(const char *name, const char *v, double lo, double hi) {
  char *end;
  errno = 0;
  double x = v ? strtod(v, &end) : 0;
  if (!v || errno || end == v || *end || x != x)
    usage_fail("%s: seconds %g..%g, got '%s'", name, lo, hi, v ? v : "");
  if (x < lo || x > hi) usage_fail("%s: %g..%g s, got %s", name, lo, hi, v);
  return x;
}

/* ---- JSON ---- */

static void jb_put(struct jb *j, const char *p, size_t n) {
  if (j->n + n + 1 > j->cap) {
    size_t cap = j->cap ? j->cap : 512;
    while (j->n + n + 1 > cap) cap *= 2;
    j->s = realloc(j->s, cap);
    if (!j->s) usage_fail("out of memory");
    j->cap = cap;
  }
  memcpy(j->s + j->n, p, n);
  j->n += n;
  j->s[j->n] = 0;
}

void jb_raw(struct jb *j, const char *fmt, ...) {
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n > 0) jb_put(j, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

static void jb_quote(struct jb *j, const char *s) {
  jb_put(j, "\"", 1);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') {
      char e[2] = {'\\', (char)c};
      jb_put(j, e, 2);
    } else if (c < 0x20) {
      jb_raw(j, "\\u%04x", c);
    } else {
      jb_put(j, (const char *)&c, 1);
    }
  }
  jb_put(j, "\"", 1);
}

void jb_key(struct jb *j, const char *key) {
  if (!j->first) jb_put(j, ",", 1);
  j->first = 0;
  if (key) {
    jb_quote(j, key);
    jb_put(j, ":", 1);
  }
}

void jb_open(struct jb *j, const char *event, const char *mode) {
  memset(j, 0, sizeof *j);
  jb_put(j, "{", 1);
  j->first = 1;
  jb_str(j, "event", event);
  if (mode) jb_str(j, "mode", mode);
}

void jb_str(struct jb *j, const char *key, const char *val) {
  jb_key(j, key);
  if (val) jb_quote(j, val);
  else jb_put(j, "null", 4);
}

void jb_u64(struct jb *j, const char *key, uint64_t v) {
  jb_key(j, key);
  jb_raw(j, "%llu", (unsigned long long)v);
}

void jb_num(struct jb *j, const char *key, double v) {
  jb_key(j, key);
  if (v != v) jb_put(j, "null", 4);
  else jb_raw(j, "%.9g", v);
}

void jb_bool(struct jb *j, const char *key, int v) {
  jb_key(j, key);
  jb_raw(j, "%s", v ? "true" : "false");
}

void jb_arr_open(struct jb *j, const char *key) {
  jb_key(j, key);
  jb_put(j, "[", 1);
  j->first = 1;
}

void jb_arr_close(struct jb *j) {
  jb_put(j, "]", 1);
  j->first = 0;
}

void jb_obj_open(struct jb *j) {
  jb_key(j, NULL);
  jb_put(j, "{", 1);
  j->first = 1;
}

void jb_obj_close(struct jb *j) {
  jb_put(j, "}", 1);
  j->first = 0;
}

void jb_emit(struct jb *j) {
  jb_put(j, "}\n", 2);
  fputs(j->s, stdout);
  fflush(stdout);
  free(j->s);
  memset(j, 0, sizeof *j);
}

/* ---- the file set ---- */

void set_path(char *out, size_t outsz, const char *dir, uint64_t i, uint64_t n) {
  if (n <= MAX_PER_DIR)
    snprintf(out, outsz, "%s/f%07llu", dir, (unsigned long long)i);
  else
    snprintf(out, outsz, "%s/d%04llu/f%07llu", dir, (unsigned long long)(i / MAX_PER_DIR),
             (unsigned long long)i);
}

void errtext(char *err, const char *what, const char *path, int e) {
  if (path) snprintf(err, ERRTXT, "%s %s: %s", what, path, strerror(e));
  else snprintf(err, ERRTXT, "%s: %s", what, strerror(e));
}

int set_mkdirs(const char *dir, uint64_t n, char *err) {
  char p[4096];
  if (n <= MAX_PER_DIR) return 0;
  for (uint64_t d = 0; d * MAX_PER_DIR < n; d++) {
    snprintf(p, sizeof p, "%s/d%04llu", dir, (unsigned long long)d);
    if (mkdir(p, 0755) < 0 && errno != EEXIST) {
      errtext(err, "mkdir", p, errno);
      return -1;
    }
  }
  return 0;
}

int drop_caches(char *err) {
  const char *path = getenv("QOELAB_IOBENCH_DROP_CACHES");
  if (!path || !*path) path = "/proc/sys/vm/drop_caches";
  sync();
  int fd = open(path, O_WRONLY | O_TRUNC);
  if (fd < 0) {
    int e = errno;
    if (e == EACCES || e == EPERM || e == EROFS)
      snprintf(err, ERRTXT, "dropping the page cache needs root (writing %s: %s)", path, strerror(e));
    else
      errtext(err, "open", path, e);
    return -1;
  }
  if (write(fd, "3\n", 2) != 2) {
    errtext(err, "write", path, errno);
    close(fd);
    return -1;
  }
  close(fd);
  return 0;
}

int checkpoint_fs(const char *dir, char *err) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY);
  if (fd < 0) {
    errtext(err, "open", dir, errno);
    return -1;
  }
  if (ioctl(fd, FIFREEZE, 0) < 0) {
    int e = errno;
    close(fd);
    if (e == EOPNOTSUPP || e == ENOTTY || e == EINVAL) return 0;
    errtext(err, "freeze", dir, e);
    return -1;
  }
  int thawed = ioctl(fd, FITHAW, 0), e = errno;
  close(fd);
  if (thawed < 0) {
    errtext(err, "thaw", dir, e);
    return -1;
  }
  return 1;
}

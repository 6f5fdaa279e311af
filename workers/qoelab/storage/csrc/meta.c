/* storage-iobench meta: the thesis' metadata benchmark (notes §3.6).
 *
 * In an initially empty directory: n x mkdir, n x touch (create an empty file), one ls (readdir of
 * the directory), n x unlink (the files), n x rmdir (the directories), in that order. Each kind's
 * time runs from its first operation until the sync() after its last completes; the optional cache
 * drop after the sync is not timed. --kinds runs a contiguous part of the sequence (e.g. mkdir,touch
 * then, after the caller remounted a FUSE client, ls, then unlink,rmdir); the emptiness check holds
 * only when mkdir is among them. --markers prints "phase <kind> start|end <CLOCK_REALTIME ns>" lines
 * (plain text, not JSON) around each kind so the host can cut a packet capture per kind.
 */
#include "iobench.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *KINDS[] = {"mkdir", "touch", "ls", "unlink", "rmdir"};
enum { K_MKDIR, K_TOUCH, K_LS, K_UNLINK, K_RMDIR, NKINDS };

static int parse_kinds(const char *v) {
  int mask = 0;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", v);
  for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    int k = 0;
    while (k < NKINDS && strcmp(tok, KINDS[k])) k++;
    if (k == NKINDS) usage_fail("--kinds: a comma list of mkdir,touch,ls,unlink,rmdir, got '%s'", tok);
    mask |= 1 << k;
  }
  if (!mask) usage_fail("--kinds: at least one of mkdir,touch,ls,unlink,rmdir, got '%s'", v);
  return mask;
}

/* One operation of a kind; 0 or -1 with err. *entries: names ls read. */
static int op(int kind, const char *dir, long i, uint64_t *entries, char *err) {
  char p[4096];
  switch (kind) {
  case K_MKDIR:
  case K_RMDIR:
    snprintf(p, sizeof p, "%s/d%06ld", dir, i);
    if ((kind == K_MKDIR ? mkdir(p, 0755) : rmdir(p)) == 0) return 0;
    errtext(err, KINDS[kind], p, errno);
    return -1;
  case K_TOUCH: {
    snprintf(p, sizeof p, "%s/f%06ld", dir, i);
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd >= 0 && close(fd) == 0) return 0;
    errtext(err, "touch", p, errno);
    return -1;
  }
  case K_UNLINK:
    snprintf(p, sizeof p, "%s/f%06ld", dir, i);
    if (unlink(p) == 0) return 0;
    errtext(err, "unlink", p, errno);
    return -1;
  default: {
    DIR *d = opendir(dir);
    if (!d) {
      errtext(err, "ls", dir, errno);
      return -1;
    }
    struct dirent *e;
    errno = 0;
    while ((e = readdir(d)))
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) (*entries)++;
    int bad = errno;
    closedir(d);
    if (!bad) return 0;
    errtext(err, "ls", dir, bad);
    return -1;
  }
  }
}

static int is_empty(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) usage_fail("--dir: cannot open %s: %s", dir, strerror(errno));
  struct dirent *e;
  int empty = 1;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) empty = 0;
  closedir(d);
  return empty;
}

static void marker(const char *kind, const char *what) {
  printf("phase %s %s %llu\n", kind, what, (unsigned long long)real_ns());
  fflush(stdout);
}

int cmd_meta(int argc, char **argv) {
  static const struct option lo[] = {{"dir", 1, 0, 'd'},         {"n", 1, 0, 'n'},       {"kinds", 1, 0, 'k'},
                                     {"drop-caches", 0, 0, 'D'}, {"markers", 0, 0, 'm'}, {"help", 0, 0, 'h'},
                                     {0, 0, 0, 0}};
  const char *dir = NULL;
  long n = -1;
  int mask = (1 << NKINDS) - 1, drop = 0, markers = 0, c;
  char err[ERRTXT], first_err[ERRTXT] = "";
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":", lo, NULL)) != -1) {
    switch (c) {
    case 'd': dir = optarg; break;
    case 'n': n = opt_int("--n", optarg, 1, 1000000); break;
    case 'k': mask = parse_kinds(optarg); break;
    case 'D': drop = 1; break;
    case 'm': markers = 1; break;
    case 'h':
      fputs("usage: " PROG " meta --dir DIR --n 1..1000000 [--kinds mkdir,touch,ls,unlink,rmdir]\n"
            "         [--drop-caches] [--markers]\n", stderr);
      exit(2);
    case ':': usage_fail("meta: %s needs a value", argv[optind - 1]);
    default: usage_fail("meta: unknown option %s", argv[optind - 1]);
    }
  }
  if (optind < argc) usage_fail("meta: unexpected argument '%s'", argv[optind]);
  if (!dir) usage_fail("--dir: required");
  if (n < 0) usage_fail("--n: required (1..1000000)");
  int lo_k = __builtin_ctz((unsigned)mask), hi_k = 31 - __builtin_clz((unsigned)mask);
  if (mask != ((1 << (hi_k + 1)) - (1 << lo_k)))
    usage_fail("--kinds: a contiguous part of mkdir,touch,ls,unlink,rmdir, got a gap");
  struct stat st;
  if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) usage_fail("--dir: not a directory: %s", dir);
  if ((mask & 1 << K_MKDIR) && !is_empty(dir)) usage_fail("--dir: must be empty for mkdir, %s is not", dir);
  if (drop && drop_caches(err) < 0) usage_fail("--drop-caches: %s", err); /* fail before any work */

  struct { uint64_t count, failed, entries, ops_ns, sync_ns, start_real, end_real; } r[NKINDS];
  memset(r, 0, sizeof r);
  uint64_t real0 = real_ns(), t0 = mono_ns();
  struct jb j;
  for (int k = lo_k; k <= hi_k; k++) {
    long reps = k == K_LS ? 1 : n;
    if (markers) marker(KINDS[k], "start");
    r[k].start_real = real_ns();
    uint64_t a = mono_ns();
    for (long i = 0; i < reps; i++) {
      if (op(k, dir, i, &r[k].entries, err) == 0) r[k].count++;
      else {
        r[k].failed++;
        if (!first_err[0]) memcpy(first_err, err, sizeof err);
      }
    }
    uint64_t b = mono_ns();
    sync();
    uint64_t s = mono_ns();
    r[k].ops_ns = b - a, r[k].sync_ns = s - b;
    r[k].end_real = real_ns();
    if (markers) marker(KINDS[k], "end");
    if (drop && drop_caches(err) < 0) usage_fail("--drop-caches: %s", err);
    jb_open(&j, "round", "meta");
    jb_str(&j, "op", KINDS[k]);
    jb_u64(&j, "n", (uint64_t)reps);
    jb_u64(&j, "failed", r[k].failed);
    jb_num(&j, "seconds", (double)(s - a) / 1e9);
    jb_emit(&j);
  }
  jb_open(&j, "result", "meta");
  jb_str(&j, "dir", dir);
  jb_u64(&j, "n", (uint64_t)n);
  jb_bool(&j, "drop_caches", drop);
  jb_u64(&j, "failed", r[0].failed + r[1].failed + r[2].failed + r[3].failed + r[4].failed);
  jb_str(&j, "first_error", first_err[0] ? first_err : NULL);
  jb_num(&j, "outer_s", (double)(mono_ns() - t0) / 1e9);
  jb_u64(&j, "start_realtime_ns", real0);
  jb_arr_open(&j, "ops");
  for (int k = lo_k; k <= hi_k; k++) {
    jb_obj_open(&j);
    jb_str(&j, "op", KINDS[k]);
    jb_u64(&j, "n", k == K_LS ? 1 : (uint64_t)n);
    jb_u64(&j, "done", r[k].count);
    jb_u64(&j, "failed", r[k].failed);
    if (k == K_LS) jb_u64(&j, "entries", r[k].entries);
    jb_num(&j, "seconds", (double)(r[k].ops_ns + r[k].sync_ns) / 1e9);
    jb_num(&j, "ops_seconds", (double)r[k].ops_ns / 1e9);
    jb_num(&j, "sync_seconds", (double)r[k].sync_ns / 1e9);
    jb_u64(&j, "start_ns", r[k].start_real);
    jb_u64(&j, "end_ns", r[k].end_real);
    jb_obj_close(&j);
  }
  jb_arr_close(&j);
  jb_emit(&j);
  return 0;
}

/* storage-iobench varmail / fileserver: an emulation of FileBench 1.4.9.1's two personalities
 * (notes §4.2; FileBench itself is not packaged in Debian and is not used here).
 *
 * A file set of --files entries with gamma(1.5)-distributed sizes (mean --mean-size), --prealloc %
 * of them created with their size before the run, in a flat directory (varmail) or a tree of mean
 * width --dir-width (fileserver). Then --threads threads loop over the personality's flowops, in
 * the stock .f order, for --seconds:
 *   varmail:    deletefile1 createfile2 appendfilerand2 fsyncfile2 closefile2 openfile3 readfile3
 *               appendfilerand3 fsyncfile3 closefile3 openfile4 readfile4 closefile4
 *   fileserver: createfile1 wrtfile1 closefile1 openfile1 appendfilerand1 closefile2 openfile2
 *               readfile1 closefile3 deletefile1 statfile1
 * createfile picks an absent entry, deletefile/openfile/statfile a present one, never one another
 * thread holds. An append is uniform in 1..2*mean-1 bytes (mean --mean-append, the thesis' "average
 * append 16 KiB"); whole-file reads and writes go in --iosize calls. A flowop that fails (or finds
 * no entry to pick) is counted as an error and the thread starts its next loop. IOPS = every
 * flowop's completed operations / run time, as FileBench's "IO Summary" line.
 */
#include "iobench.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { DELETE, CREATE, APPEND, FSYNC, CLOSE, OPEN, READWHOLE, WRITEWHOLE, STAT };
static const char *OPNAMES[] = {"deletefile", "createfile", "appendfilerand", "fsync", "closefile",
                                "openfile",   "readwholefile", "writewholefile", "statfile"};
struct flowop { const char *name; int op; };
static const struct flowop VARMAIL[] = {
    {"deletefile1", DELETE}, {"createfile2", CREATE}, {"appendfilerand2", APPEND}, {"fsyncfile2", FSYNC},
    {"closefile2", CLOSE},   {"openfile3", OPEN},     {"readfile3", READWHOLE},   {"appendfilerand3", APPEND},
    {"fsyncfile3", FSYNC},   {"closefile3", CLOSE},   {"openfile4", OPEN},        {"readfile4", READWHOLE},
    {"closefile4", CLOSE}};
static const struct flowop FILESERVER[] = {
    {"createfile1", CREATE}, {"wrtfile1", WRITEWHOLE}, {"closefile1", CLOSE}, {"openfile1", OPEN},
    {"appendfilerand1", APPEND}, {"closefile2", CLOSE}, {"openfile2", OPEN},  {"readfile1", READWHOLE},
    {"closefile3", CLOSE},   {"deletefile1", DELETE},  {"statfile1", STAT}};
#define MAXFLOW 16
#define MAXTHREADS 256

enum { ABSENT, PRESENT, BUSY };
struct entry { uint64_t size; unsigned char state; };
struct fstat_ { uint64_t ops, errors, bytes, ns; };
struct worker { int id; uint64_t rng; struct fstat_ st[MAXFLOW]; pthread_t th; };

static struct {
  const char *dir, *name;
  char root[4096];
  const struct flowop *flow;
  int nflow;
  long threads, width, prealloc, files;
  uint64_t mean_size, mean_append, iosize, seed;
  double seconds, interval;
  int drop, wait;
} P;
static struct entry *ents;
static int levels; /* directory levels above a file (0: flat) */
static pthread_mutex_t emu = PTHREAD_MUTEX_INITIALIZER, errmu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int stop;
static atomic_uint_fast64_t total_ops;
static char first_err[ERRTXT];

static uint64_t rnd(uint64_t *s) { /* xorshift64* */
  *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
  return *s * 0x2545F4914F6CDD1Dull;
}
static double unif(uint64_t *s) { return ((double)(rnd(s) >> 11) + 0.5) / 9007199254740992.0; }

/* gamma(shape 1.5, mean m) = theta * (Exp(1) + Z^2 / 2), theta = m / 1.5 */
static uint64_t gamma_size(uint64_t *s, uint64_t mean) {
  double z = sqrt(-2 * log(unif(s))) * cos(2 * M_PI * unif(s));
  double x = (double)mean / 1.5 * (-log(unif(s)) + z * z / 2);
  return x < 1 ? 1 : (uint64_t)x;
}

static void epath(char *out, size_t sz, long i) {
  int n = snprintf(out, sz, "%s", P.root);
  long leaf = i / P.width, div = 1;
  for (int l = 1; l < levels; l++) div *= P.width;
  for (int l = levels; l > 0; l--, div = div > 1 ? div / P.width : 1)
    n += snprintf(out + n, sz - (size_t)n, "/%ld", (leaf / div) % P.width);
  snprintf(out + n, sz - (size_t)n, "/f%07ld", i);
}

static long pick(uint64_t *s, int want) {
  pthread_mutex_lock(&emu);
  long start = (long)(rnd(s) % (uint64_t)P.files), got = -1;
  for (long k = 0; k < P.files; k++) {
    long i = (start + k) % P.files;
    if (ents[i].state == want) {
      ents[i].state = BUSY, got = i;
      break;
    }
  }
  pthread_mutex_unlock(&emu);
  return got;
}
static void put(long i, int state) {
  pthread_mutex_lock(&emu);
  ents[i].state = (unsigned char)state;
  pthread_mutex_unlock(&emu);
}

static int wr(int fd, const char *buf, uint64_t n, uint64_t *moved) {
  while (n > 0) {
    size_t want = n < P.iosize ? (size_t)n : (size_t)P.iosize;
    ssize_t r = write(fd, buf, want);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    n -= (uint64_t)r, *moved += (uint64_t)r;
  }
  return 0;
}

static void *run(void *arg) {
  struct worker *w = arg;
  char *buf = malloc(P.iosize), path[4096], err[ERRTXT];
  if (!buf) usage_fail("out of memory");
  memset(buf, 0x5a ^ w->id, P.iosize);
  int fd = -1;
  long cur = -1;
  while (!atomic_load(&stop)) {
    for (int f = 0; f < P.nflow && !atomic_load(&stop); f++) {
      int op = P.flow[f].op, ok = 1;
      uint64_t moved = 0, a = mono_ns();
      err[0] = 0;
      if (op == DELETE || op == CREATE || op == OPEN || op == STAT) {
        long i = pick(&w->rng, op == CREATE ? ABSENT : PRESENT);
        if (i < 0) {
          snprintf(err, ERRTXT, "%s: no %s file to pick", P.flow[f].name, op == CREATE ? "absent" : "present");
          ok = 0;
        } else {
          epath(path, sizeof path, i);
          if (op == DELETE) {
            ok = unlink(path) == 0 || errno == ENOENT;
            put(i, ok ? ABSENT : PRESENT);
          } else if (op == STAT) {
            struct stat st;
            ok = stat(path, &st) == 0;
            put(i, PRESENT);
          } else {
            fd = open(path, op == CREATE ? O_RDWR | O_CREAT | O_TRUNC : O_RDWR, 0644);
            ok = fd >= 0;
            if (ok) cur = i;
            else put(i, op == CREATE ? ABSENT : PRESENT);
          }
          if (!ok) errtext(err, P.flow[f].name, path, errno);
        }
      } else if (fd < 0) {
        snprintf(err, ERRTXT, "%s: no open file", P.flow[f].name);
        ok = 0;
      } else if (op == APPEND) {
        uint64_t n = 1 + rnd(&w->rng) % (2 * P.mean_append - 1);
        ok = lseek(fd, 0, SEEK_END) >= 0 && wr(fd, buf, n, &moved) == 0;
      } else if (op == WRITEWHOLE) {
        ok = lseek(fd, 0, SEEK_SET) >= 0 && wr(fd, buf, ents[cur].size, &moved) == 0;
      } else if (op == READWHOLE) {
        ssize_t r = 0;
        if (lseek(fd, 0, SEEK_SET) < 0) r = -1;
        while (r >= 0 && (r = read(fd, buf, P.iosize)) > 0) moved += (uint64_t)r;
        ok = r == 0;
      } else if (op == FSYNC) {
        ok = fsync(fd) == 0;
      } else if (op == CLOSE) {
        ok = close(fd) == 0;
        fd = -1;
        put(cur, PRESENT);
      }
      if (!ok && !err[0]) errtext(err, P.flow[f].name, NULL, errno);
      if (ok) {
        w->st[f].ops++, w->st[f].bytes += moved, w->st[f].ns += mono_ns() - a;
        atomic_fetch_add_explicit(&total_ops, 1, memory_order_relaxed);
      } else {
        w->st[f].errors++;
        pthread_mutex_lock(&errmu);
        if (!first_err[0]) memcpy(first_err, err, ERRTXT);
        pthread_mutex_unlock(&errmu);
        break; /* the rest of this loop depends on what failed */
      }
    }
    if (fd >= 0) { /* a loop cut short */
      close(fd);
      fd = -1;
      put(cur, PRESENT);
    }
  }
  free(buf);
  return NULL;
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)ftw;
  return flag == FTW_DP ? rmdir(p) : unlink(p);
}

static void prepare(void) {
  char path[4096], err[ERRTXT];
  struct stat st;
  if (lstat(P.root, &st) == 0 && nftw(P.root, rm_cb, 32, FTW_DEPTH | FTW_PHYS) < 0)
    usage_fail("cannot remove the previous file set %s: %s", P.root, strerror(errno));
  if (mkdir(P.root, 0755) < 0) usage_fail("mkdir %s: %s", P.root, strerror(errno));
  levels = 0;
  for (long cap = P.width; cap < P.files; cap *= P.width) levels++;
  uint64_t s = P.seed * 0x9E3779B97F4A7C15ull + 1;
  long *order = malloc(sizeof(long) * (size_t)P.files);
  char *buf = malloc(P.iosize);
  if (!order || !buf) usage_fail("out of memory");
  memset(buf, 0x33, P.iosize);
  for (long i = 0; i < P.files; i++) {
    ents[i].size = gamma_size(&s, P.mean_size), ents[i].state = ABSENT, order[i] = i;
    epath(path, sizeof path, i);
    for (char *q = path + strlen(P.root) + 1; (q = strchr(q, '/')); q++) { /* the entry's directories */
      *q = 0;
      if (mkdir(path, 0755) < 0 && errno != EEXIST) usage_fail("mkdir %s: %s", path, strerror(errno));
      *q = '/';
    }
  }
  for (long i = P.files - 1; i > 0; i--) { /* which entries exist: a seeded shuffle */
    long k = (long)(rnd(&s) % (uint64_t)(i + 1)), t = order[i];
    order[i] = order[k], order[k] = t;
  }
  long n = (P.files * P.prealloc + 50) / 100;
  for (long k = 0; k < n; k++) {
    long i = order[k];
    uint64_t moved = 0;
    epath(path, sizeof path, i);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || wr(fd, buf, ents[i].size, &moved) < 0 || close(fd) < 0) {
      errtext(err, "preallocate", path, errno);
      usage_fail("%s", err);
    }
    ents[i].state = PRESENT;
  }
  sync();
  free(order);
  free(buf);
}

int cmd_fbench(int argc, char **argv, int fileserver) {
  static const struct option lo[] = {
      {"dir", 1, 0, 'd'},       {"seconds", 1, 0, 's'},    {"threads", 1, 0, 't'},    {"files", 1, 0, 'n'},
      {"mean-size", 1, 0, 'm'}, {"mean-append", 1, 0, 'a'}, {"iosize", 1, 0, 'i'},    {"prealloc", 1, 0, 'p'},
      {"dir-width", 1, 0, 'w'}, {"seed", 1, 0, 'S'},       {"interval", 1, 0, 'I'},   {"drop-caches", 0, 0, 'D'},
      {"wait-before-run", 0, 0, 'W'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
  P.name = fileserver ? "fileserver" : "varmail";
  P.flow = fileserver ? FILESERVER : VARMAIL;
  P.nflow = fileserver ? (int)(sizeof FILESERVER / sizeof *FILESERVER) : (int)(sizeof VARMAIL / sizeof *VARMAIL);
  P.threads = fileserver ? 50 : 16, P.files = fileserver ? 10000 : 1000, P.width = fileserver ? 20 : 1000000;
  P.mean_size = fileserver ? 128 << 10 : 16 << 10, P.mean_append = 16 << 10, P.iosize = 1 << 20;
  P.prealloc = 80, P.seconds = 120, P.interval = 1, P.seed = 1;
  int c;
  char err[ERRTXT];
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":", lo, NULL)) != -1) {
    switch (c) {
    case 'd': P.dir = optarg; break;
    case 's': P.seconds = opt_seconds("--seconds", optarg, 0.1, 86400); break;
    case 't': P.threads = opt_int("--threads", optarg, 1, MAXTHREADS); break;
    case 'n': P.files = opt_int("--files", optarg, 1, 10000000); break;
    case 'm': P.mean_size = opt_size("--mean-size", optarg, 1, 1ull << 30); break;
    case 'a': P.mean_append = opt_size("--mean-append", optarg, 1, 1ull << 30); break;
    case 'i': P.iosize = opt_size("--iosize", optarg, 1, 1ull << 30); break;
    case 'p': P.prealloc = opt_int("--prealloc", optarg, 0, 100); break;
    case 'w': P.width = opt_int("--dir-width", optarg, 2, 1000000); break;
    case 'S': P.seed = (uint64_t)opt_int("--seed", optarg, 0, 2147483647); break;
    case 'I': P.interval = opt_seconds("--interval", optarg, 0.05, 60); break;
    case 'D': P.drop = 1; break;
    case 'W': P.wait = 1; break;
    case 'h':
      fprintf(stderr, "usage: " PROG " %s --dir DIR [--seconds S] [--threads 1..256] [--files N] [--mean-size B]\n"
              "         [--mean-append B] [--iosize B] [--prealloc 0..100] [--dir-width 2..1000000] [--seed N]\n"
              "         [--interval S] [--drop-caches] [--wait-before-run]\n", P.name);
      exit(2);
    case ':': usage_fail("%s: %s needs a value", P.name, argv[optind - 1]);
    default: usage_fail("%s: unknown option %s", P.name, argv[optind - 1]);
    }
  }
  if (optind < argc) usage_fail("%s: unexpected argument '%s'", P.name, argv[optind]);
  if (!P.dir) usage_fail("--dir: required");
  struct stat st;
  if (stat(P.dir, &st) < 0 || !S_ISDIR(st.st_mode)) usage_fail("--dir: not a directory: %s", P.dir);
  snprintf(P.root, sizeof P.root, "%s/%s", P.dir, P.name);
  ents = calloc((size_t)P.files, sizeof *ents);
  if (!ents) usage_fail("out of memory");

  struct jb j;
  uint64_t a = mono_ns();
  prepare();
  double prep_s = (double)(mono_ns() - a) / 1e9;
  if (P.wait) { /* the caller switches the link back to the emulated profile, then says go */
    jb_open(&j, "prealloc_done", P.name);
    jb_num(&j, "prealloc_s", prep_s);
    jb_emit(&j);
    char line[64];
    if (!fgets(line, sizeof line, stdin)) usage_fail("--wait-before-run: stdin closed before the go-ahead line");
  }
  if (P.drop && drop_caches(err) < 0) usage_fail("--drop-caches: %s", err);

  struct worker *ws = calloc((size_t)P.threads, sizeof *ws);
  if (!ws) usage_fail("out of memory");
  uint64_t real0 = real_ns(), t0 = mono_ns();
  jb_open(&j, "start", P.name);
  jb_u64(&j, "realtime_ns", real0);
  jb_emit(&j);
  for (long k = 0; k < P.threads; k++) {
    ws[k].id = (int)k, ws[k].rng = (P.seed + 1) * 0x9E3779B97F4A7C15ull + (uint64_t)k * 0xBF58476D1CE4E5B9ull;
    if (pthread_create(&ws[k].th, NULL, run, &ws[k])) usage_fail("pthread_create failed");
  }
  uint64_t end = t0 + (uint64_t)(P.seconds * 1e9), tick = (uint64_t)(P.interval * 1e9), next = t0 + tick;
  for (;;) {
    uint64_t now = mono_ns(), until = next < end ? next : end;
    if (now < until) {
      struct timespec d = {.tv_sec = (time_t)((until - now) / 1000000000ull), .tv_nsec = (long)((until - now) % 1000000000ull)};
      nanosleep(&d, NULL);
      continue;
    }
    if (now >= end) break;
    jb_open(&j, "progress", P.name);
    jb_num(&j, "t_s", (double)(now - t0) / 1e9);
    jb_u64(&j, "ops", atomic_load(&total_ops));
    jb_emit(&j);
    next += tick;
  }
  atomic_store(&stop, 1);
  uint64_t t_stop = mono_ns();
  for (long k = 0; k < P.threads; k++) pthread_join(ws[k].th, NULL);
  double run_s = (double)(t_stop - t0) / 1e9;

  struct fstat_ sum[MAXFLOW];
  memset(sum, 0, sizeof sum);
  uint64_t ops = 0, errors = 0, rbytes = 0, wbytes = 0, lat_ns = 0;
  for (long k = 0; k < P.threads; k++)
    for (int f = 0; f < P.nflow; f++) {
      sum[f].ops += ws[k].st[f].ops, sum[f].errors += ws[k].st[f].errors;
      sum[f].bytes += ws[k].st[f].bytes, sum[f].ns += ws[k].st[f].ns;
    }
  for (int f = 0; f < P.nflow; f++) {
    ops += sum[f].ops, errors += sum[f].errors, lat_ns += sum[f].ns;
    if (P.flow[f].op == READWHOLE) rbytes += sum[f].bytes;
    else wbytes += sum[f].bytes;
  }
  jb_open(&j, "result", P.name);
  jb_str(&j, "emulation", fileserver ? "FileBench 1.4.9.1 fileserver personality, emulated (FileBench is not used)"
                                     : "FileBench 1.4.9.1 varmail personality, emulated (FileBench is not used)");
  jb_str(&j, "dir", P.root);
  jb_num(&j, "seconds", run_s);
  jb_u64(&j, "threads", (uint64_t)P.threads);
  jb_u64(&j, "files", (uint64_t)P.files);
  jb_u64(&j, "mean_size", P.mean_size);
  jb_u64(&j, "mean_append", P.mean_append);
  jb_u64(&j, "iosize", P.iosize);
  jb_u64(&j, "prealloc_percent", (uint64_t)P.prealloc);
  jb_u64(&j, "dir_width", (uint64_t)P.width);
  jb_u64(&j, "dir_levels", (uint64_t)levels);
  jb_num(&j, "prealloc_s", prep_s);
  jb_u64(&j, "ops", ops);
  jb_num(&j, "iops", run_s > 0 ? (double)ops / run_s : 0);
  jb_u64(&j, "errors", errors);
  jb_u64(&j, "read_bytes", rbytes);
  jb_u64(&j, "write_bytes", wbytes);
  jb_num(&j, "mb_s", run_s > 0 ? (double)(rbytes + wbytes) / 1048576.0 / run_s : 0);
  jb_num(&j, "ms_per_op", ops ? (double)lat_ns / 1e6 / (double)ops : 0);
  jb_str(&j, "first_error", first_err[0] ? first_err : NULL);
  jb_u64(&j, "start_realtime_ns", real0);
  jb_arr_open(&j, "flowops");
  for (int f = 0; f < P.nflow; f++) {
    jb_obj_open(&j);
    jb_str(&j, "name", P.flow[f].name);
    jb_str(&j, "op", OPNAMES[P.flow[f].op]);
    jb_u64(&j, "ops", sum[f].ops);
    jb_num(&j, "ops_per_s", run_s > 0 ? (double)sum[f].ops / run_s : 0);
    jb_u64(&j, "errors", sum[f].errors);
    jb_u64(&j, "bytes", sum[f].bytes);
    jb_num(&j, "ms_per_op", sum[f].ops ? (double)sum[f].ns / 1e6 / (double)sum[f].ops : 0);
    jb_obj_close(&j);
  }
  jb_arr_close(&j);
  jb_emit(&j);
  free(ws);
  free(ents);
  return 0;
}

/* storage-iobench micro / prepare: the thesis' worker-pool microbenchmark (notes §3, §7).
 *
 * T pthreads, released together by a barrier once all exist, take whole-file jobs (read or write
 * file i of the set) from a shared counter until the set is done or the round's time limit
 * (counted from before thread creation) is reached; a job already begun always finishes, a job
 * not yet handed out when the limit passes is left and the round flagged. A failed job (open,
 * read, write or close error, or a short read) moves no bytes in the totals and is counted, with
 * the first error's text. Throughput = bytes of successful jobs / 2^20 / internal elapsed (first
 * job start to last job end); the outer elapsed includes thread creation and join.
 */
#include "iobench.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_THREADS 64

enum { F_DEFAULT, F_SYNC, F_DIRECT };
static const char *FORMS[] = {"default", "sync", "direct"};

struct mopts {
  const char *dir;
  int write, form, overwrite, drop, cold, prepare;
  uint64_t size, unit, files, set_files; /* set_files: the count the set was laid out for */
  long threads;
  double limit, interval;
};

struct tstat {
  int id;
  uint64_t serviced, failed, bytes, first_ns, last_ns;
};

static struct mopts O;
static atomic_uint_fast64_t next_job, done_ok, done_fail, done_bytes;
static atomic_int limit_hit;
static uint64_t t0_ns, limit_ns;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv;
static pthread_barrier_t go; /* the pool starts together: no thread drains a set of tiny files alone */
static int finished;
static char first_err[ERRTXT];

static void note_error(const char *msg) {
  pthread_mutex_lock(&mu);
  if (!first_err[0]) snprintf(first_err, sizeof first_err, "%s", msg);
  pthread_mutex_unlock(&mu);
}

/* One whole-file job; 0 on success (*moved = its bytes), -1 with err filled. */
static int job(uint64_t i, char *buf, uint64_t *moved, char *err) {
  char path[4096];
  set_path(path, sizeof path, O.dir, i, O.set_files);
  int flags = O.form == F_DIRECT ? O_DIRECT : O.form == F_SYNC ? O_SYNC : 0;
  int fd = O.write ? open(path, O_WRONLY | O_CREAT | O_TRUNC | flags, 0644) : open(path, O_RDONLY | flags);
  if (fd < 0) {
    errtext(err, "open", path, errno);
    return -1;
  }
  uint64_t left = O.size;
  *moved = 0;
  while (left > 0) {
    size_t want = left < O.unit ? (size_t)left : (size_t)O.unit;
    ssize_t r = O.write ? write(fd, buf, want) : read(fd, buf, want);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      if (r < 0) errtext(err, O.write ? "write" : "read", path, errno);
      else snprintf(err, ERRTXT, "%s %s: ended after %llu of %llu bytes", O.write ? "write" : "read", path,
                    (unsigned long long)*moved, (unsigned long long)O.size);
      close(fd);
      return -1;
    }
    left -= (uint64_t)r;
    *moved += (uint64_t)r;
  }
  if (close(fd) < 0) { /* NFS reports deferred write errors here */
    errtext(err, "close", path, errno);
    return -1;
  }
  return 0;
}

static void *worker(void *arg) {
  struct tstat *t = arg;
  size_t len = (O.unit + ALIGN - 1) / ALIGN * ALIGN;
  char *buf = NULL, err[ERRTXT];
  if (posix_memalign((void **)&buf, ALIGN, len ? len : ALIGN)) usage_fail("out of memory (%zu bytes)", len);
  if (O.write) { /* not zeros: a target that compresses or dedups must still move the bytes */
    uint64_t x = 0x9E3779B97F4A7C15ull * (uint64_t)(t->id + 1);
    for (size_t k = 0; k + 8 <= len; k += 8) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      memcpy(buf + k, &x, 8);
    }
  }
  pthread_barrier_wait(&go);
  for (;;) {
    uint64_t i = atomic_fetch_add(&next_job, 1);
    if (i >= O.files) break;
    uint64_t start = mono_ns();
    if (start - t0_ns >= limit_ns) {
      atomic_store(&limit_hit, 1);
      break;
    }
    if (!t->first_ns) t->first_ns = start;
    uint64_t moved = 0;
    if (job(i, buf, &moved, err) == 0) {
      t->serviced++;
      t->bytes += moved;
      atomic_fetch_add(&done_ok, 1);
      atomic_fetch_add(&done_bytes, moved);
    } else {
      t->failed++;
      atomic_fetch_add(&done_fail, 1);
      note_error(err);
    }
    t->last_ns = mono_ns();
  }
  free(buf);
  pthread_mutex_lock(&mu);
  finished++;
  pthread_cond_signal(&cv);
  pthread_mutex_unlock(&mu);
  return NULL;
}

static __attribute__((noreturn)) void usage(void) {
  fputs("usage: " PROG " micro --dir DIR --op read|write --size BYTES --files N [--threads 1..64]\n"
        "         [--form default|sync|direct] [--unit BYTES] [--limit S] [--write-mode delete|overwrite]\n"
        "         [--drop-caches [--cold-metadata]] [--set-files N] [--interval S]\n"
        "       " PROG " prepare --dir DIR --size BYTES --files N [--threads 1..64] [--interval S]\n",
        stderr);
  exit(2);
}

static void parse(int argc, char **argv) {
  static const struct option lo[] = {
      {"dir", 1, 0, 'd'},   {"op", 1, 0, 'o'},         {"form", 1, 0, 'F'},   {"unit", 1, 0, 'u'},
      {"size", 1, 0, 's'},  {"files", 1, 0, 'n'},      {"threads", 1, 0, 't'}, {"limit", 1, 0, 'l'},
      {"write-mode", 1, 0, 'w'}, {"drop-caches", 0, 0, 'D'}, {"interval", 1, 0, 'i'}, {"help", 0, 0, 'h'},
      {"set-files", 1, 0, 'S'}, {"cold-metadata", 0, 0, 'C'}, {0, 0, 0, 0}};
  const char *cmd = O.prepare ? "prepare" : "micro";
  int c, have_size = 0, have_files = 0, have_op = O.prepare;
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":", lo, NULL)) != -1) {
    if (O.prepare && c > 0 && strchr("oFulwDSC", c)) {
      int k = 0;
      while (lo[k].val != c) k++;
      usage_fail("prepare: --%s is not an option of prepare", lo[k].name);
    }
    switch (c) {
    case 'd': O.dir = optarg; break;
    case 'o':
      if (strcmp(optarg, "read") && strcmp(optarg, "write")) usage_fail("--op: read or write, got '%s'", optarg);
      O.write = !strcmp(optarg, "write"), have_op = 1;
      break;
    case 'F':
      for (O.form = 0; O.form < 3 && strcmp(optarg, FORMS[O.form]); O.form++) {}
      if (O.form == 3) usage_fail("--form: default, sync or direct, got '%s'", optarg);
      break;
    case 'u': O.unit = opt_size("--unit", optarg, 1, 1ull << 30); break;
    case 's': O.size = opt_size("--size", optarg, 0, 1ull << 40), have_size = 1; break;
    case 'n': O.files = (uint64_t)opt_int("--files", optarg, 1, 100000000), have_files = 1; break;
    case 't': O.threads = opt_int("--threads", optarg, 1, MAX_THREADS); break;
    case 'l': O.limit = opt_seconds("--limit", optarg, 0.001, 86400); break;
    case 'w':
      if (strcmp(optarg, "delete") && strcmp(optarg, "overwrite"))
        usage_fail("--write-mode: delete or overwrite, got '%s'", optarg);
      O.overwrite = !strcmp(optarg, "overwrite");
      break;
    case 'D': O.drop = 1; break;
    case 'C': O.cold = 1; break;
    case 'S': O.set_files = (uint64_t)opt_int("--set-files", optarg, 1, 100000000); break;
    case 'i': O.interval = opt_seconds("--interval", optarg, 0.05, 60); break;
    case 'h': usage();
    case ':': usage_fail("%s: %s needs a value", cmd, argv[optind - 1]);
    default: usage_fail("%s: unknown option %s", cmd, argv[optind - 1]);
    }
  }
  if (optind < argc) usage_fail("%s: unexpected argument '%s'", cmd, argv[optind]);
  if (!O.dir) usage_fail("--dir: required");
  if (!have_op) usage_fail("--op: required (read or write)");
  if (!have_size) usage_fail("--size: required (bytes per file)");
  if (!have_files) usage_fail("--files: required (1..100000000)");
  if (!O.set_files) O.set_files = O.files;
  if (O.cold && !O.drop) usage_fail("--cold-metadata: only with --drop-caches (it makes the drop reach metadata)");
  if (O.set_files < O.files)
    usage_fail("--set-files: at least --files (%llu), got %llu", (unsigned long long)O.files,
               (unsigned long long)O.set_files);
  if (!O.unit) O.unit = O.size > (1ull << 30) ? 1ull << 30 : O.size ? O.size : 4096;
  if (O.form == F_DIRECT && (O.unit % 512 || O.size % 512))
    usage_fail("--%s: a multiple of 512 with --form direct, got %llu", O.unit % 512 ? "unit" : "size",
               (unsigned long long)(O.unit % 512 ? O.unit : O.size));
}

int cmd_micro(int argc, char **argv, int prepare) {
  char err[ERRTXT];
  struct stat st;
  O = (struct mopts){.threads = prepare ? 32 : 1, .limit = prepare ? 86400 : 90, .interval = 1.0,
                     .prepare = prepare, .write = prepare};
  parse(argc, argv);
  const char *mode = prepare ? "prepare" : "micro";
  if (prepare && mkdir(O.dir, 0755) < 0 && errno != EEXIST) usage_fail("--dir: cannot create %s: %s", O.dir, strerror(errno));
  if (stat(O.dir, &st) < 0 || !S_ISDIR(st.st_mode)) usage_fail("--dir: not a directory: %s", O.dir);

  uint64_t deleted = 0, delete_ns = 0, drop_ns = 0;
  if (O.write && set_mkdirs(O.dir, O.set_files, err) < 0) usage_fail("%s", err);
  if (O.write && !O.overwrite) { /* NFS/iSCSI: creating differs from overwriting (notes §3.4) */
    char path[4096];
    uint64_t a = mono_ns();
    for (uint64_t i = 0; i < O.files; i++) {
      set_path(path, sizeof path, O.dir, i, O.set_files);
      if (unlink(path) == 0) deleted++;
      else if (errno != ENOENT) usage_fail("delete before rewrite: unlink %s: %s", path, strerror(errno));
    }
    delete_ns = mono_ns() - a;
  }
  int checkpointed = -1; /* not asked */
  if (O.drop) {
    uint64_t a = mono_ns();
    if (O.cold && (checkpointed = checkpoint_fs(O.dir, err)) < 0) usage_fail("--cold-metadata: %s", err);
    if (drop_caches(err) < 0) usage_fail("--drop-caches: %s", err);
    /* A drop's shrinker passes only age a dentry or inode used since the last pass (rotated, not
     * freed), and a dentry pins its inode and its parent: the file's and its directory's entries
     * and inodes need up to three drops to be gone, whatever else the drop found to free. */
    for (int k = 0; checkpointed == 1 && k < 2; k++)
      if (drop_caches(err) < 0) usage_fail("--drop-caches: %s", err);
    drop_ns = mono_ns() - a;
  }

  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&cv, &ca);
  struct tstat ts[MAX_THREADS];
  pthread_t th[MAX_THREADS];
  memset(ts, 0, sizeof ts);
  limit_ns = (uint64_t)(O.limit * 1e9);

  struct jb j;
  uint64_t real0 = real_ns();
  jb_open(&j, "start", mode);
  jb_u64(&j, "realtime_ns", real0);
  jb_emit(&j);

  pthread_barrier_init(&go, NULL, (unsigned)O.threads);
  t0_ns = mono_ns();
  long started = 0;
  for (; started < O.threads; started++) {
    ts[started].id = (int)started;
    if (pthread_create(&th[started], NULL, worker, &ts[started])) usage_fail("pthread_create failed");
  }
  uint64_t tick = (uint64_t)(O.interval * 1e9), next = t0_ns + tick;
  pthread_mutex_lock(&mu);
  while (finished < started) {
    struct timespec dl = {.tv_sec = (time_t)(next / 1000000000ull), .tv_nsec = (long)(next % 1000000000ull)};
    if (pthread_cond_timedwait(&cv, &mu, &dl) == ETIMEDOUT) {
      pthread_mutex_unlock(&mu);
      uint64_t now = mono_ns();
      jb_open(&j, "progress", mode);
      jb_num(&j, "t_s", (double)(now - t0_ns) / 1e9);
      jb_u64(&j, "serviced", atomic_load(&done_ok));
      jb_u64(&j, "failed", atomic_load(&done_fail));
      jb_u64(&j, "bytes", atomic_load(&done_bytes));
      jb_emit(&j);
      next += tick;
      pthread_mutex_lock(&mu);
    }
  }
  pthread_mutex_unlock(&mu);
  for (long k = 0; k < started; k++) pthread_join(th[k], NULL);
  uint64_t t1_ns = mono_ns();

  uint64_t first = 0, last = 0, serviced = 0, failed = 0, bytes = 0, sync_ns = 0;
  for (long k = 0; k < started; k++) {
    if (ts[k].first_ns && (!first || ts[k].first_ns < first)) first = ts[k].first_ns;
    if (ts[k].last_ns > last) last = ts[k].last_ns;
    serviced += ts[k].serviced, failed += ts[k].failed, bytes += ts[k].bytes;
  }
  if (prepare) {
    uint64_t a = mono_ns();
    sync();
    sync_ns = mono_ns() - a;
  }
  double internal = first ? (double)(last - first) / 1e9 : 0, outer = (double)(t1_ns - t0_ns) / 1e9;
  jb_open(&j, "result", mode);
  jb_str(&j, "dir", O.dir);
  jb_str(&j, "op", O.write ? "write" : "read");
  jb_str(&j, "form", FORMS[O.form]);
  jb_str(&j, "write_mode", O.write ? (O.overwrite ? "overwrite" : "delete") : NULL);
  jb_u64(&j, "files", O.files);
  jb_u64(&j, "set_files", O.set_files);
  jb_u64(&j, "size", O.size);
  jb_u64(&j, "unit", O.unit);
  jb_u64(&j, "threads", (uint64_t)O.threads);
  jb_num(&j, "limit_s", O.limit);
  jb_u64(&j, "serviced", serviced);
  jb_u64(&j, "failed", failed);
  jb_u64(&j, "not_started", O.files - serviced - failed);
  jb_bool(&j, "complete", serviced == O.files);
  jb_bool(&j, "time_limit_hit", atomic_load(&limit_hit));
  jb_u64(&j, "bytes", bytes);
  jb_num(&j, "internal_s", internal);
  jb_num(&j, "outer_s", outer);
  jb_num(&j, "mib_s", internal > 0 ? (double)bytes / 1048576.0 / internal : 0);
  jb_num(&j, "mib_s_outer", outer > 0 ? (double)bytes / 1048576.0 / outer : 0);
  jb_str(&j, "first_error", first_err[0] ? first_err : NULL);
  jb_u64(&j, "deleted_before", deleted);
  jb_num(&j, "delete_s", (double)delete_ns / 1e9);
  jb_num(&j, "drop_caches_s", O.drop ? (double)drop_ns / 1e9 : 0);
  jb_str(&j, "cold_metadata", checkpointed < 0 ? NULL : checkpointed ? "done" : "unsupported");
  if (prepare) jb_num(&j, "sync_s", (double)sync_ns / 1e9);
  jb_u64(&j, "start_realtime_ns", real0);
  jb_u64(&j, "end_realtime_ns", real_ns());
  jb_arr_open(&j, "per_thread");
  for (long k = 0; k < started; k++) {
    jb_obj_open(&j);
    jb_u64(&j, "thread", (uint64_t)k);
    jb_u64(&j, "serviced", ts[k].serviced);
    jb_u64(&j, "failed", ts[k].failed);
    jb_u64(&j, "bytes", ts[k].bytes);
    jb_num(&j, "elapsed_s", ts[k].first_ns ? (double)(ts[k].last_ns - ts[k].first_ns) / 1e9 : 0);
    jb_obj_close(&j);
  }
  jb_arr_close(&j);
  jb_emit(&j);
  return 0;
}

/* storage-iobench: shared declarations (see main.c for the subcommands and output format). */
#ifndef IOBENCH_H
#define IOBENCH_H
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>

#define PROG "storage-iobench"
#define MAX_PER_DIR 4096   /* thesis §4.2: at most 4,096 files per (sub)directory */
#define ALIGN 4096         /* buffer alignment for O_DIRECT */
#define ERRTXT 8192

/* time */
uint64_t mono_ns(void);
uint64_t real_ns(void);

/* errors: one line on stderr, exit 2 */
void usage_fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

/* option values: "--name: bound, got value" on a bad one */
uint64_t opt_size(const char *name, const char *v, uint64_t lo, uint64_t hi);
long opt_int(const char *name, const char *v, long lo, long hi);
double opt_seconds(const char *name, const char *v, double lo, double hi);

/* a growing JSON object written as one line */
struct jb {
  char *s;
  size_t n, cap;
  int first; /* no comma before the next member */
};
void jb_open(struct jb *j, const char *event, const char *mode);
void jb_raw(struct jb *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void jb_key(struct jb *j, const char *key);
void jb_str(struct jb *j, const char *key, const char *val); /* val NULL -> null */
void jb_u64(struct jb *j, const char *key, uint64_t v);
void jb_num(struct jb *j, const char *key, double v);
void jb_bool(struct jb *j, const char *key, int v);
void jb_arr_open(struct jb *j, const char *key);
void jb_arr_close(struct jb *j);
void jb_obj_open(struct jb *j); /* an object inside an array */
void jb_obj_close(struct jb *j);
void jb_emit(struct jb *j); /* closes the object, prints it with a newline, flushes, frees */

/* the file set: file i of n under dir ("f0000012", or "d0003/f0012300" past 4,096 files) */
void set_path(char *out, size_t outsz, const char *dir, uint64_t i, uint64_t n);
int set_mkdirs(const char *dir, uint64_t n, char *err); /* the subdirectories a set needs */

/* sync() then "3" into /proc/sys/vm/drop_caches ($QOELAB_IOBENCH_DROP_CACHES overrides the path) */
int drop_caches(char *err);
/* Freeze and at once thaw the file system holding dir (FIFREEZE/FITHAW): its journal is committed
 * and checkpointed, so the metadata buffers jbd2 pins become droppable (ext4 on iSCSI; micro's
 * --cold-metadata). 1: done, 0: the file system cannot freeze (NFS, FUSE), -1: error (in err). */
int checkpoint_fs(const char *dir, char *err);

void errtext(char *err, const char *what, const char *path, int e);

int cmd_micro(int argc, char **argv, int prepare);
int cmd_meta(int argc, char **argv);
int cmd_fbench(int argc, char **argv, int fileserver);
#endif

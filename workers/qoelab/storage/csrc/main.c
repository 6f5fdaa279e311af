/* storage-iobench: the storage benchmark of thesis 001 (Hwang), run inside the client that mounts
 * the target (NFS, iSCSI-ext4, rclone-Swift) or on the host against any directory.
 *
 *   storage-iobench prepare    --dir D --size B --files N [--threads T]      create a file set
 *   storage-iobench micro      --dir D --op read|write --size B --files N   the worker-pool round
 *                              [--threads 1..64] [--form default|sync|direct] [--unit B] [--limit S]
 *                              [--write-mode delete|overwrite] [--drop-caches [--cold-metadata]]
 *                              [--set-files N]
 *   storage-iobench meta       --dir D --n N [--kinds ...] [--drop-caches] [--markers]
 *   storage-iobench varmail    --dir D [--seconds 120] [...]   FileBench's personality, emulated
 *   storage-iobench fileserver --dir D [--seconds 120] [...]   FileBench's personality, emulated
 *   storage-iobench dropcache                                   sync, then 3 > drop_caches
 *
 * A file set of N files is D/f0000000.. or, past 4,096 files, D/dNNNN/fNNNNNNN with 4,096 per
 * subdirectory (the thesis' bucket rule); micro --set-files N reads or writes the first --files of
 * a set laid out for N. stdout carries one JSON object per line: "start",
 * "progress" (every --interval s, default 1), "round" (meta: one per kind), "prealloc_done"
 * (--wait-before-run) and one final "result" with every number; meta --markers adds plain
 * "phase <kind> start|end <ns>" lines. A round with failed operations still exits 0 (the result
 * counts them); a bad option or a failure to set up exits 2 with one line on stderr naming the
 * option and its bound, e.g. "storage-iobench: --threads: 1..64, got 0".
 */
#include "iobench.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  const char *cmd = argc > 1 ? argv[1] : "";
  if (!strcmp(cmd, "micro")) return cmd_micro(argc - 1, argv + 1, 0);
  if (!strcmp(cmd, "prepare")) return cmd_micro(argc - 1, argv + 1, 1);
  if (!strcmp(cmd, "meta")) return cmd_meta(argc - 1, argv + 1);
  if (!strcmp(cmd, "varmail")) return cmd_fbench(argc - 1, argv + 1, 0);
  if (!strcmp(cmd, "fileserver")) return cmd_fbench(argc - 1, argv + 1, 1);
  if (!strcmp(cmd, "dropcache")) {
    char err[ERRTXT];
    if (argc > 2) usage_fail("dropcache: takes no options, got '%s'", argv[2]);
    uint64_t a = mono_ns();
    if (drop_caches(err) < 0) usage_fail("dropcache: %s", err);
    struct jb j;
    jb_open(&j, "result", "dropcache");
    jb_num(&j, "seconds", (double)(mono_ns() - a) / 1e9);
    jb_emit(&j);
    return 0;
  }
  usage_fail("a subcommand: prepare, micro, meta, varmail, fileserver or dropcache%s%s%s",
             *cmd ? ", got '" : "", cmd, *cmd ? "'" : "");
}

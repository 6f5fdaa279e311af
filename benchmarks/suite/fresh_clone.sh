#!/bin/bash
# A fresh-clone run of the suite, as CI makes it, kept as a committed run (docs/testing.md).
#
#   bash benchmarks/suite/fresh_clone.sh NAME            # benchmarks/suite/NAME/ from a quiet host
#   bash benchmarks/suite/fresh_clone.sh --loaded NAME   # with one CPU-bound process beside the run
#
# Clones this checkout's HEAD into a scratch folder (with ../shared beside it, as CI has it),
# empties /var/tmp/qoelab-vm so no image or saved guest state is found, samples /proc/stat every
# 10 s, runs `CI=true bash .ci/run` there and writes the folder with record_run.py. Run as root on
# a host with nothing else running; it takes 20-60 minutes.
set -euo pipefail
loaded=0
if [ "${1:-}" = "--loaded" ]; then loaded=1; shift; fi
name=${1:?usage: fresh_clone.sh [--loaded] NAME}
repo=$(cd "$(dirname "$0")/../.." && pwd)
scratch=$(mktemp -d /tmp/qoelab-suite.XXXXXX)
chmod 755 "$scratch"  # mktemp's 0700 would lock out the test that drops to user nobody, as no CI checkout does
echo "fresh clone in $scratch; the run's log: $scratch/log"

git clone -q "$repo" "$scratch/main"
cp -r "$repo/../shared" "$scratch/shared"
git -C "$scratch/main" rev-parse --short HEAD > "$scratch/commit"
rm -rf /var/tmp/qoelab-vm

sample() {  # the host's busy share every 10 s, from /proc/stat
    echo -e "t\tbusy_percent"
    read -r _ a b c d e f g h _ < /proc/stat; pb=$((a+b+c+f+g+h)); pt=$((a+b+c+d+e+f+g+h))
    while sleep 10; do
        read -r _ a b c d e f g h _ < /proc/stat; nb=$((a+b+c+f+g+h)); nt=$((a+b+c+d+e+f+g+h))
        echo -e "$(date +%s)\t$(( 100 * (nb - pb) / (nt - pt) ))"; pb=$nb; pt=$nt
    done
}
sample > "$scratch/cpu.tsv" &
sampler=$!
hog=
if [ "$loaded" = 1 ]; then  # a second CPU-heavy job, as on a shared CI host
    python3 -c 'while True: pass' &
    hog=$!
fi
trap 'kill $sampler $hog 2>/dev/null || true' EXIT

date +%s > "$scratch/start"
status=0
(cd "$scratch/main" && CI=true bash .ci/run > "$scratch/log" 2>&1) || status=$?
date +%s > "$scratch/end"
echo "$status" > "$scratch/rc"
load="nothing else ran but /proc/stat sampled every 10 s (cpu.tsv)"
if [ -n "$hog" ]; then
    # utime + stime of the busy loop, in clock ticks, over the run's wall time
    cpu=$(awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$hog/stat")
    load="one CPU-bound process beside the whole run (a Python busy loop, fresh_clone.sh --loaded); it got ${cpu} s of CPU; /proc/stat sampled every 10 s (cpu.tsv)"
fi
kill $sampler $hog 2>/dev/null || true
python3 "$repo/benchmarks/suite/record_run.py" "$scratch" "$repo/benchmarks/suite/$name" "$load"
exit "$status"

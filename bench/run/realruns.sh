#!/bin/bash
# Real failures through `crashlens run`, one bundle each under OUT (default /tmp/crashlens-run-cases):
#   segv        a Python job reading through a bad pointer (SIGSEGV, core and faulthandler)
#   amx         the static AMX program of fixtures/cores/amx (SIGILL on CPUs without AMX; XFD otherwise)
#   oom         a job growing past a 400 MiB memory cgroup (cgroup v1 or v2, made here, removed after)
#   shm         a DataLoader with 2 workers and an 8 MiB /dev/shm (a private mount namespace)
#   disk        checkpoints saved into a 24 MiB tmpfs
#   timeout     `timeout 4 crashlens run …`: SIGTERM to crashlens, passed on to the job
#   torchrun    two gloo ranks, rank 1 raises FileNotFoundError at step 3
# Needs root (cgroups, mounts, unshare), the venv /tmp/rr (torch CPU, see fixtures/real-runs/README.md)
# and crashlens on PATH (CRASHLENS=…/crashlens to choose one).
set -u
here=$(cd "$(dirname "$0")" && pwd)
OUT=${1:-/tmp/crashlens-run-cases}
CL=${CRASHLENS:-crashlens}
PY=${PY:-/tmp/rr/bin/python}
export PATH=$(dirname "$PY"):$PATH
mkdir -p "$OUT"; rm -rf "${OUT:?}"/*
work=$(mktemp -d); cd "$work"
case_() { echo "== $1"; }

case_ segv
"$CL" run -o "$OUT/segv" -- "$PY" "$here/jobs/segv.py" > "$OUT/segv.term" 2>&1; echo "exit $?" >> "$OUT/segv.term"

case_ amx
xz -dc "$here/../../fixtures/cores/amx/amx.xz" > amx && chmod +x amx
"$CL" run -o "$OUT/amx" -- ./amx plain > "$OUT/amx.term" 2>&1; echo "exit $?" >> "$OUT/amx.term"

case_ oom
if [ -d /sys/fs/cgroup/memory ]; then
  cg=/sys/fs/cgroup/memory/clrun; mkdir -p $cg; echo $((400 << 20)) > $cg/memory.limit_in_bytes
  echo 0 > $cg/memory.swappiness 2>/dev/null
  bash -c "echo \$\$ > $cg/tasks; exec \"$CL\" run -o \"$OUT/oom\" -- \"$PY\" \"$here/jobs/alloc.py\"" > "$OUT/oom.term" 2>&1
  echo "exit $?" >> "$OUT/oom.term"; rmdir $cg 2>/dev/null
else
  cg=/sys/fs/cgroup/clrun; mkdir -p $cg; echo $((400 << 20)) > $cg/memory.max; echo 0 > $cg/memory.swap.max 2>/dev/null
  bash -c "echo \$\$ > $cg/cgroup.procs; exec \"$CL\" run -o \"$OUT/oom\" -- \"$PY\" \"$here/jobs/alloc.py\"" > "$OUT/oom.term" 2>&1
  echo "exit $?" >> "$OUT/oom.term"; rmdir $cg 2>/dev/null
fi

case_ shm
unshare -m bash -c "mount --make-rprivate / && mount -t tmpfs -o size=8m tmpfs /dev/shm && \
  \"$CL\" run -o \"$OUT/shm\" --interval 0.2 -- \"$PY\" \"$here/jobs/shm_loader.py\"" > "$OUT/shm.term" 2>&1
echo "exit $?" >> "$OUT/shm.term"

case_ disk
mkdir -p /mnt/clrun-ckpt && mount -t tmpfs -o size=24m tmpfs /mnt/clrun-ckpt
(cd /mnt/clrun-ckpt && "$CL" run -o "$OUT/disk" --interval 0.2 -- "$PY" "$here/jobs/ckpt.py" /mnt/clrun-ckpt) > "$OUT/disk.term" 2>&1
echo "exit $?" >> "$OUT/disk.term"; umount /mnt/clrun-ckpt; rmdir /mnt/clrun-ckpt

case_ timeout
timeout 4 "$CL" run -o "$OUT/timeout" -- "$PY" "$here/jobs/loop.py" > "$OUT/timeout.term" 2>&1; echo "exit $?" >> "$OUT/timeout.term"

case_ torchrun
"$CL" run -o "$OUT/torchrun" -- torchrun --standalone --nproc_per_node=2 "$here/jobs/ddp.py" > "$OUT/torchrun.term" 2>&1
echo "exit $?" >> "$OUT/torchrun.term"
cd /; rm -rf "$work"
for c in segv amx oom shm disk timeout torchrun; do
  printf '%-9s %s | %s\n' "$c" "$(tail -1 "$OUT/$c.term")" \
    "$(python3 -c "import json,sys;d=json.load(open('$OUT/$c/analysis.json'));c=d['causes'];print(c[0]['category'] if c else None)" 2>/dev/null)"
done

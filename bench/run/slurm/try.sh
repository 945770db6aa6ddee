#!/bin/bash
# Try crashlens' Slurm recipe (docs/run.md, Recipes) on a single-node Slurm cluster on this host.
# Needs: apt-get install -y slurm-wlm munge (Debian 12: Slurm 22.05.8), root, no systemd needed.
# Usage: bash try.sh [setup|cases [a b c ...]|teardown|all]   (default all: setup, cases a-g, teardown)
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
CL=/work/main/.venv/bin/crashlens
WORK=/tmp/crashlens-slurm          # rendered config, job folders, bundles (copied to results/)
RES=$HERE/results
export SLURM_CONF=$WORK/slurm.conf  # client commands, and (exported by sbatch) the job's scontrol
PIDS=$WORK/pids

setup() {
    mkdir -p "$WORK" /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge /var/lib/munge /var/log/munge
    sed "s/@HOST@/$(hostname -s)/g" "$HERE/slurm.conf" > "$SLURM_CONF"
    if [ ! -s /etc/munge/munge.key ]; then
        mungekey --create --keyfile=/etc/munge/munge.key 2>/dev/null || \
            dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
    fi
    chown munge:munge /etc/munge/munge.key /run/munge /var/lib/munge /var/log/munge; chmod 400 /etc/munge/munge.key
    : > "$PIDS"
    runuser -u munge -- /usr/sbin/munged
    sleep 1; pgrep -u munge -x munged >> "$PIDS"
    munge -n | unmunge | grep -q 'STATUS: *Success' || { echo "munge does not work"; exit 1; }
    /usr/sbin/slurmctld -f "$SLURM_CONF"      # daemonizes; pid file /run/slurmctld.pid
    sleep 2
    /usr/sbin/slurmd -f "$SLURM_CONF"
    for _ in $(seq 30); do
        sinfo -h -o '%T' 2>/dev/null | grep -q idle && break; sleep 1
    done
    cat /run/slurmctld.pid /run/slurmd.pid >> "$PIDS"
    sinfo
}

wait_end() {   # job id, max seconds
    for _ in $(seq "$2"); do
        [ -z "$(squeue -h -j "$1" 2>/dev/null)" ] && return 0; sleep 1
    done
    echo "job $1 still running after $2 s"; return 1
}

run_case() {   # name, sbatch file, what to do after submitting
    local name=$1 script=$2 action=$3 d=$WORK/$1 id
    rm -rf "$d"; mkdir -p "$d"; cp "$HERE/job.py" "$HERE/job_sig.py" "$d/"; cp "$HERE/$script" "$d/"
    cd "$d" || exit 1
    id=$(sbatch --parsable "$script"); echo "case $name: job $id submitted $(date +%s.%N)" | tee "$d/events.txt"
    case $action in
        wait) : ;;
        batch) sleep 6; echo "scancel --signal=TERM --batch $id at $(date +%s.%N)" | tee -a "$d/events.txt"
               scancel --signal=TERM --batch "$id" ;;
        plain) sleep 6; echo "scancel $id at $(date +%s.%N)" | tee -a "$d/events.txt"
               scancel "$id" ;;
    esac
    wait_end "$id" 240
    echo "job $id gone from squeue $(date +%s.%N)" | tee -a "$d/events.txt"
    scontrol show job "$id" > "$d/scontrol-after.txt" 2>&1
    grep -E "JobId=$id[^0-9]|job $id[^0-9]|JobId=$id$" /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log > "$d/slurm-log.txt" 2>/dev/null
    # keep the output, the bundle (no cores) and the analysis
    rm -rf "${RES:?}/$name"; mkdir -p "$RES/$name"
    cp "$d"/job-*.out "$d"/events.txt "$d"/scontrol-after.txt "$d"/slurm-log.txt "$d/$script" "$RES/$name/"
    mkdir -p "$RES/$name/bundle"
    [ -d "$d/bundle" ] && find "$d/bundle" -maxdepth 1 -type f ! -name 'core*' -exec cp {} "$RES/$name/bundle/" \;
    $CL --no-color analyze "$RES/$name/bundle" > "$RES/$name/analyze.txt" 2>&1
    echo "--- $name: bundle files"; ls -la "$RES/$name/bundle"
    cd "$HERE" || exit 1
}

cases() {
    local which=${*:-a b c d e f g}
    for w in $which; do case $w in
        a) run_case a_usr1_timelimit case_a.sbatch wait ;;
        b) run_case b_scancel_batch_term case_b.sbatch batch ;;
        c) run_case c_scancel_plain case_b.sbatch plain ;;
        d) run_case d_timelimit_no_signal case_d.sbatch wait ;;
        e) run_case e_scancel_plain_senders case_e.sbatch plain ;;
        f) run_case f_srun_batch_usr1_as_documented case_f.sbatch wait ;;
        g) run_case g_srun_step_usr1 case_g.sbatch wait ;;
    esac; done
}

teardown() {
    for f in /run/slurmd.pid /run/slurmctld.pid; do
        [ -s $f ] && kill "$(cat $f)" 2>/dev/null
    done
    sleep 2
    [ -s "$PIDS" ] && pgrep -u munge -x munged | while read -r p; do grep -qx "$p" "$PIDS" && kill "$p"; done
    sleep 2
    left=$(for n in slurmctld slurmd slurmstepd munged; do pgrep -x $n; done)
    [ -n "$left" ] && { echo "still running:"; ps -o pid,stat,comm -p "$(echo $left | tr ' ' ,)"; } || echo "all daemons stopped"
}

case ${1:-all} in
    setup) setup ;; cases) shift; cases "$@" ;; teardown) teardown ;;
    all) setup && cases; teardown ;;
esac

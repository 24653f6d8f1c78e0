#!/bin/sh
# Runs inside the VM bench (scripts/bench/vm.sh), from its input disk: a one-node Slurm cluster
# on cgroup v2, configured as AWS ParallelCluster does (no CgroupPlugin line: Slurm detects
# v2), and the node role run against real jobs. Writes, per scenario, under OUT/<scenario>/:
#   truth.txt        what the 300 MB job says it holds (its own reading)
#   once-1.jsonl, once-2.jsonl   `slurm-cw-shipper --once --sink stdout` while it runs
#   check.txt, check.rc          `slurm-cw-shipper --check` and its exit status
#   suspended.jsonl, frozen.txt   the daemon (a collection a second, $3.60 an hour) while the
#                    job runs and then `scontrol suspend` holds it, and which of its cgroups
#                    said `frozen 1` then
#   daemon.jsonl     the daemon's stdout around a `sleep 2` job (its summary: the TaskEpilog's)
#   captures/        Slurm's own view of the job (scontrol, squeue, the cgroup tree)
# and OUT/epilog.log: each TaskEpilog's uid and cgroup, its job's processes then, and the
# daemon's answer to its final-sample request when it is not `ok`.
#
#   guest.sh IN OUT   (IN has this script, workload.py, task-epilog.sh, slurm-cw-shipper,
#                      version, and optionally scenarios: names, one a line)
# Scenarios: ram (ConstrainRAMSpace=yes), noram (without it), and with `-idpaths` appended,
# CgroupJobIdPaths=yes (26.05's job_<id> directories instead of SLUIDs). slurmd restarts
# between scenarios, within one boot.
set -eu
in=$1
out=$2
version=$(cat "$in/version")
say() { echo "vm-bench: $*"; echo "vm-bench: $*" > /dev/ttyS0 2>/dev/null || true; }
fail() { say "FAILED: $*"; exit 1; }

# wait_for WHAT SECONDS COMMAND...: polls COMMAND every half second.
wait_for() {
    what=$1 limit=$2
    shift 2
    end=$(( $(date +%s) + limit ))
    until "$@" > /dev/null 2>&1; do
        [ "$(date +%s)" -lt "$end" ] || fail "$what: not within $limit s"
        sleep 0.5
    done
}

if [ -f "$in/scenarios" ]; then
    scenarios=$(cat "$in/scenarios")
elif [ "$version" = 26.05 ]; then
    scenarios="ram noram ram-idpaths"
else
    scenarios="ram noram"
fi

say "cgroup: $(stat -fc %T /sys/fs/cgroup), Slurm $(slurmctld -V)"
install -m 755 "$in/slurm-cw-shipper" /usr/local/bin/slurm-cw-shipper
install -m 755 "$in/task-epilog.sh" /etc/slurm/task-epilog.sh
# The TaskEpilog: ParallelCluster's (infra/slurm/task-epilog.sh), after a note of where it runs
# (its uid and cgroup, and the processes of its job's cgroup then) in OUT/epilog.log.
cat > /etc/slurm/task-epilog-bench.sh <<EOF
#!/bin/sh
{
    echo "job=\$SLURM_JOB_ID uid=\$(id -u) cgroup=\$(cat /proc/self/cgroup)"
    job_cg=/sys/fs/cgroup\$(sed -n 's/^0:://p' /proc/self/cgroup | sed 's#/step_.*##')
    for f in \$(find "\$job_cg" -name cgroup.procs); do
        for p in \$(cat "\$f"); do
            # A process gone since the listing (this note's own commands) is left out.
            c=\$(cat /proc/\$p/comm 2>/dev/null) && echo "  \$f \$p \$c uid=\$(stat -c %u /proc/\$p)"
        done
    done
} >> $out/epilog.log 2>&1
export SLURM_CW_SHIPPER_BIN=/usr/local/bin/slurm-cw-shipper-noted
exec /etc/slurm/task-epilog.sh
EOF
# The hook client as that TaskEpilog runs it, with the daemon's answer (printed when not ok).
cat > /usr/local/bin/slurm-cw-shipper-noted <<EOF
#!/bin/sh
exec /usr/local/bin/slurm-cw-shipper "\$@" 2>> $out/epilog.log
EOF
chmod 755 /etc/slurm/task-epilog-bench.sh /usr/local/bin/slurm-cw-shipper-noted
mkdir -p /var/log/slurm /var/lib/slurm/slurmctld /var/lib/slurm/slurmd
chown slurm:slurm /var/log/slurm /var/lib/slurm/slurmctld
host=$(hostname)
cat > /etc/slurm/slurm.conf <<EOF
# Written by scripts/bench/vm/guest.sh: one node, ParallelCluster's plugins.
ClusterName=vmbench
SlurmctldHost=$host
SlurmUser=slurm
AuthType=auth/munge
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/cgroup
TaskPlugin=task/affinity,task/cgroup
# Each job's extern step (pam_slurm_adopt needs it): slurmstepd forks root's
# "sleep 100000000" into the job's cgroup before any task; the job stays its user's.
PrologFlags=Contain
TaskEpilog=/etc/slurm/task-epilog-bench.sh
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=100
ReturnToService=2
MinJobAge=3600
KillWait=5
SlurmdParameters=config_overrides
NodeName=$host CPUs=2 RealMemory=2500 State=UNKNOWN
PartitionName=batch Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF

write_cgroup_conf() {
    {
        echo "# ParallelCluster's cgroup.conf: no CgroupPlugin line (autodetected)."
        echo "ConstrainCores=yes"
        case "$1" in ram*) echo "ConstrainRAMSpace=yes" ;; esac
        case "$1" in *-idpaths) echo "CgroupJobIdPaths=yes" ;; esac
    } > /etc/slurm/cgroup.conf
}

node_idle() { sinfo -h -N -o %t | grep -qx idle; }
job_state() { scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'; }
job_is() { [ "$(job_state "$1")" = "$2" ]; }
job_done() { s=$(job_state "$1"); [ -n "$s" ] && [ "$s" != RUNNING ] && [ "$s" != PENDING ] && [ "$s" != COMPLETING ]; }
truth_ready() { grep -q '^anon_bytes=' "$1"; }
# The job's cgroups that report themselves frozen (cgroup.events), relative to the job's.
frozen_in() { find "$1" -name cgroup.events -exec grep -l '^frozen 1' {} + 2>/dev/null | sed "s#^$1/##"; }

t0=$(date +%s)
write_cgroup_conf ram
systemctl start munge
systemctl start slurmctld
systemctl start slurmd
wait_for "the node to be idle" 120 node_idle
say "Slurm up in $(( $(date +%s) - t0 )) s"

# The 300 MB job: holds the memory, keeps two processes busy, writes what it holds (the sum
# of its processes' anonymous memory and its job cgroup's memory.current) every second.
cat > /tmp/mem-job.sh <<'EOF'
#!/bin/sh
dir=$1
in=$2
env | grep '^SLURM_' | sort > "$dir/job-env.txt"
python3 "$in/workload.py" memory 300 600 &
python3 "$in/workload.py" burn 2 600 &
job_cg=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup | sed 's#/step_.*##')
while sleep 1; do
    anon=0
    for p in $(cat $(find "$job_cg" -name cgroup.procs) 2>/dev/null); do
        kb=$(sed -n 's/^RssAnon:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$p/status" 2>/dev/null)
        anon=$((anon + ${kb:-0} * 1024))
    done
    {
        echo "allocated_bytes=$((300 * 1024 * 1024))"
        echo "job_cgroup=$job_cg"
        echo "memory_current=$(cat "$job_cg/memory.current" 2>/dev/null)"
        [ "$anon" -ge $((300 * 1024 * 1024)) ] && echo "anon_bytes=$anon"
    } > "$dir/truth.new"
    mv "$dir/truth.new" "$dir/truth.txt"
done
EOF
chmod 755 /tmp/mem-job.sh

# The shipper's settings for every run here: no AWS, no spool.
export SLURM_CW_CLUSTER_NAME=vmbench SLURM_CW_SPOOL__ENABLED=false SLURM_CW_LOG__LEVEL=slurm_cw_shipper=debug

captures() {
    job=$1 dir=$2
    mkdir -p "$dir"
    scontrol -d show job -o "$job" > "$dir/scontrol-show-job-d-o.txt" 2>&1 || true
    squeue --json > "$dir/squeue.json" 2>&1 || true
    squeue -h -o %i,%s > "$dir/squeue-i-s.txt" 2>&1 || true
    find /sys/fs/cgroup/system.slice -maxdepth 4 -type d | sort > "$dir/cgroup-tree.txt"
    # Every process in the jobs' cgroups: where it sits, its real uid and name.
    find /sys/fs/cgroup/system.slice -path '*slurmstepd.scope/*' -name cgroup.procs | sort \
        | while read -r f; do
            while read -r p; do
                echo "${f#/sys/fs/cgroup/} $p $(ps -o ruid=,comm= -p "$p" 2>/dev/null)"
            done < "$f"
        done > "$dir/cgroup-processes.txt" 2>&1 || true
    pid=$(pgrep -u alice -f 'workload.py memory' | head -1)
    cat "/proc/$pid/cgroup" > "$dir/proc-pid-cgroup.txt" 2>&1 || true
    sluid=$(sed -n 's/^SLURM_JOB_SLUID=//p' "$3/job-env.txt")
    echo "$sluid" > "$dir/job-sluid.txt"
    if [ -n "$sluid" ]; then
        scontrol show job "$sluid" > "$dir/scontrol-show-job-sluid.txt" 2>&1 || true
    fi
}

for scn in $scenarios; do
    d=$out/$scn
    mkdir -p "$d"
    chmod 1777 "$d"
    ts=$(date +%s)
    write_cgroup_conf "$scn"
    cp /etc/slurm/cgroup.conf "$d/cgroup.conf"
    systemctl restart slurmd
    wait_for "the node idle after slurmd's restart" 120 node_idle
    say "$scn: slurmd restarted with $(grep -v '^#' /etc/slurm/cgroup.conf | tr '\n' ' ')"

    job=$(runuser -u alice -- sbatch --parsable -c 2 --mem=600M -o "$d/mem-job.out" /tmp/mem-job.sh "$d" "$in")
    echo "$job" > "$d/mem-job.id"
    wait_for "job $job running" 120 job_is "$job" RUNNING
    wait_for "job $job to hold its 300 MB" 180 truth_ready "$d/truth.txt"
    say "$scn: job $job holds its memory"
    captures "$job" "$d/captures" "$d"
    slurm-cw-shipper --role node --once --sink stdout > "$d/once-1.jsonl" 2> "$d/once-1.err" || true
    sleep 3
    slurm-cw-shipper --role node --once --sink stdout > "$d/once-2.jsonl" 2> "$d/once-2.err" || true
    cp "$d/truth.txt" "$d/truth-after.txt"
    # Suspended: the daemon sees the job run, then Slurm freeze its steps; it bills the job's
    # memory alone then. A suspension it does not see is not fatal here: the test says so.
    job_cg=$(sed -n 's/^job_cgroup=//p' "$d/truth.txt")
    SLURM_CW_COLLECT_INTERVAL=1s SLURM_CW_FLUSH_INTERVAL=1s SLURM_CW_DELIVERY__FLUSH_JITTER=false \
        SLURM_CW_COST__HOURLY_PRICE=3.6 SLURM_CW_NODE__HOOK_SOCKET=/run/slurm-cw-suspended.sock \
        slurm-cw-shipper --role node --sink stdout > "$d/suspended.jsonl" 2> "$d/suspended.err" &
    watcher=$!
    wait_for "a costed sample of job $job" 120 grep -q "\"JobId\":\"$job\".*\"Share\"" "$d/suspended.jsonl"
    scontrol suspend "$job"
    wait_for "job $job suspended" 60 job_is "$job" SUSPENDED
    n=0
    until [ "$(grep -c '"SuspendedSeconds"' "$d/suspended.jsonl")" -ge 3 ] || [ "$n" -ge 120 ]; do
        sleep 0.5
        n=$((n + 1))
    done
    frozen_in "$job_cg" > "$d/frozen.txt"
    kill -TERM "$watcher" 2>/dev/null || true
    wait "$watcher" || true
    scontrol resume "$job"
    say "$scn: suspended, frozen: $(tr '\n' ' ' < "$d/frozen.txt")"
    rc=0
    slurm-cw-shipper --role node --sink stdout --check > "$d/check.txt" 2>&1 || rc=$?
    echo "$rc" > "$d/check.rc"
    scancel "$job"
    wait_for "job $job to end" 120 job_done "$job"
    say "$scn: two samples and --check (status $rc) taken"

    # The daemon, collecting once a minute; a `sleep 2` job between two collections.
    rm -f /run/slurm-cw-shipper/hook.sock
    SLURM_CW_COLLECT_INTERVAL=60s SLURM_CW_FLUSH_INTERVAL=60s SLURM_CW_DELIVERY__FLUSH_JITTER=false \
        slurm-cw-shipper --role node --sink stdout > "$d/daemon.jsonl" 2> "$d/daemon.err" &
    daemon=$!
    wait_for "the hook socket" 60 test -S /run/slurm-cw-shipper/hook.sock
    short=$(runuser -u alice -- sbatch --parsable -o /dev/null --wrap "sleep 2")
    echo "$short" > "$d/short-job.id"
    wait_for "job $short to complete" 120 job_is "$short" COMPLETED
    kill -TERM "$daemon"
    wait "$daemon" || true
    say "$scn: short job $short done; scenario took $(( $(date +%s) - ts )) s"
done

cp /var/log/slurm/slurmd.log /var/log/slurm/slurmctld.log "$out/" 2>/dev/null || true
say "all scenarios done in $(( $(date +%s) - t0 )) s"

#!/bin/bash
# ParallelCluster 3 OnNodeConfigured custom action: installs and starts slurm-cw-shipper.
#
#   on-node-configured.sh --binary SRC [--namespace NS] [--cluster-name NAME]
#                         [--epilog SRC] [--unit SRC] [--slurm-conf PATH]
#
#   --binary SRC        the slurm-cw-shipper binary: s3://bucket/key (fetched with `aws s3 cp`)
#                       or an absolute path on the node (a shared file system, say)
#   --namespace NS      CloudWatch namespace (default Slurm; the terraform module's `namespace`)
#   --cluster-name NAME the ClusterName dimension (default: slurm.conf ClusterName, else the
#                       ParallelCluster cluster name); must match the terraform module's
#   --epilog SRC        the TaskEpilog script (default: the copy of infra/slurm/task-epilog.sh
#                       built into this script)
#   --unit SRC          the systemd unit (default: the copy of
#                       infra/systemd/slurm-cw-shipper.service built into this script)
#   --slurm-conf PATH   slurm.conf (default /opt/slurm/etc/slurm.conf, else /etc/slurm/slurm.conf)
#
# On every node (HeadNode and ComputeFleet, from /etc/parallelcluster/cfnconfig) it installs
# /usr/local/bin/slurm-cw-shipper, /opt/slurm-cw-shipper/task-epilog.sh,
# /etc/slurm-cw-shipper/config.toml (rewritten on each run; keep site settings as SLURM_CW_*
# variables in /etc/slurm-cw-shipper/environment) and the systemd unit, and runs
# `systemctl enable --now slurm-cw-shipper` (a restart when it was already running). On the head
# node it also sets TaskEpilog=/opt/slurm-cw-shipper/task-epilog.sh in slurm.conf when no
# TaskEpilog is set, and runs `scontrol reconfigure`. On a login node it does nothing.
#
# Every path is under $ROOT (default empty), and systemctl, scontrol and aws are looked up in
# PATH (then $ROOT/opt/slurm/bin), so that tests/infra/test_bootstrap.py can run it in a
# temporary root with recording fakes. Exit status: 0 done, 1 failed, 2 bad arguments.
set -euo pipefail

ROOT=${ROOT:-}
PATH="$PATH:$ROOT/opt/slurm/bin"

BIN=/usr/local/bin/slurm-cw-shipper
EPILOG=/opt/slurm-cw-shipper/task-epilog.sh
CONF_DIR=/etc/slurm-cw-shipper
UNIT=/etc/systemd/system/slurm-cw-shipper.service
SERVICE=slurm-cw-shipper

log() { printf 'slurm-cw-shipper setup: %s\n' "$*"; }
die() { printf 'slurm-cw-shipper setup: %s\n' "$*" >&2; exit 1; }
usage_error() {
    printf 'slurm-cw-shipper setup: %s\n' "$*" >&2
    printf 'usage: %s --binary SRC [--namespace NS] [--cluster-name NAME] [--epilog SRC] [--unit SRC] [--slurm-conf PATH]\n' "${0##*/}" >&2
    exit 2
}

binary='' namespace=Slurm cluster_name='' epilog_src='' unit_src='' slurm_conf=''
while [ $# -gt 0 ]; do
    opt=$1
    case $opt in
        --*=*) val=${opt#*=}; opt=${opt%%=*}; shift ;;
        --binary | --namespace | --cluster-name | --epilog | --unit | --slurm-conf)
            [ $# -ge 2 ] || usage_error "$opt needs a value"
            val=$2; shift 2 ;;
        -h | --help) sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
        *) usage_error "unknown argument: $opt" ;;
    esac
    case $opt in
        --binary) binary=$val ;;
        --namespace) namespace=$val ;;
        --cluster-name) cluster_name=$val ;;
        --epilog) epilog_src=$val ;;
        --unit) unit_src=$val ;;
        --slurm-conf) slurm_conf=$val ;;
        *) usage_error "unknown argument: $opt" ;;
    esac
done
[ -n "$binary" ] || usage_error "--binary is required"
if ! [[ $namespace =~ ^[A-Za-z0-9.#:_/\ -]{1,255}$ ]] || [[ $namespace == AWS/* ]]; then
    usage_error "bad namespace '$namespace': letters, digits, spaces and . # : _ / -, not AWS/..."
fi

# --- Where we are --------------------------------------------------------------------------
cfnconfig=$ROOT/etc/parallelcluster/cfnconfig
[ -r "$cfnconfig" ] || die "$cfnconfig is missing: not a ParallelCluster 3 node"
cfn_value() { sed -n "s/^$1=//p" "$cfnconfig" | tail -n 1 | tr -d "\"'[:space:]"; }
node_type=$(cfn_value cfn_node_type)
region=$(cfn_value cfn_region)
case $node_type in
    HeadNode) ;;
    ComputeFleet) ;;
    LoginNode) log "login node: nothing to do"; exit 0 ;;
    *) die "unknown cfn_node_type '$node_type' in $cfnconfig" ;;
esac

if [ -n "$slurm_conf" ]; then
    slurm_conf=$ROOT$slurm_conf
else
    for f in "$ROOT/opt/slurm/etc/slurm.conf" "$ROOT/etc/slurm/slurm.conf"; do
        if [ -f "$f" ]; then slurm_conf=$f; break; fi
    done
fi

if [ -z "$cluster_name" ] && [ -n "$slurm_conf" ] && [ -r "$slurm_conf" ]; then
    cluster_name=$(awk -F= 'tolower($1) ~ /^[ \t]*clustername[ \t]*$/ { v = $2; sub(/#.*/, "", v); gsub(/[ \t"]/, "", v); print v }' "$slurm_conf" | tail -n 1)
fi
[ -n "$cluster_name" ] || cluster_name=$(cfn_value stack_name)
[ -n "$cluster_name" ] || die "no cluster name: give --cluster-name, or set ClusterName in slurm.conf"
[[ $cluster_name =~ ^[A-Za-z0-9][A-Za-z0-9_.-]*$ ]] || usage_error "bad cluster name '$cluster_name'"
log "$node_type of cluster $cluster_name, namespace $namespace"

# --- Files ---------------------------------------------------------------------------------
tmp_files=()
cleanup() { [ ${#tmp_files[@]} -eq 0 ] || rm -f -- "${tmp_files[@]}"; }
trap cleanup EXIT

# fetch SRC DEST MODE: SRC (s3://... or an absolute path on this node) to DEST, atomically.
fetch() {
    local src=$1 dest=$ROOT$2 mode=$3 tmp
    mkdir -p -- "$(dirname -- "$dest")"
    tmp=$dest.new.$$
    tmp_files+=("$tmp")
    case $src in
        s3://*)
            if [ -n "$region" ]; then
                aws s3 cp --only-show-errors --region "$region" "$src" "$tmp"
            else
                aws s3 cp --only-show-errors "$src" "$tmp"
            fi ;;
        /*) [ -f "$ROOT$src" ] || die "$src: no such file"
            cp -- "$ROOT$src" "$tmp" ;;
        *) usage_error "$src: give an s3:// URL or an absolute path" ;;
    esac
    [ -s "$tmp" ] || die "$src is empty"
    chmod "$mode" "$tmp"
    mv -f -- "$tmp" "$dest"
}

# write DEST MODE: standard input to DEST, atomically.
write() {
    local dest=$ROOT$1 mode=$2 tmp
    mkdir -p -- "$(dirname -- "$dest")"
    tmp=$dest.new.$$
    tmp_files+=("$tmp")
    cat > "$tmp"
    chmod "$mode" "$tmp"
    mv -f -- "$tmp" "$dest"
}

fetch "$binary" "$BIN" 0755
log "installed $BIN from $binary"

# The TaskEpilog and the unit are built in (infra/slurm/task-epilog.sh and
# infra/systemd/slurm-cw-shipper.service; update-embedded.py copies them here), so that a
# cluster needs only this script and the binary.
if [ -n "$epilog_src" ]; then
    fetch "$epilog_src" "$EPILOG" 0755
else
    write "$EPILOG" 0755 <<'EPILOG_EOF'
#!/bin/sh
# Slurm TaskEpilog (slurm.conf: TaskEpilog=/opt/slurm-cw-shipper/task-epilog.sh).
#
# Runs as the job's user after each task ends, while the job's cgroup still exists (the Epilog
# runs after Slurm removed it): asks the local slurm-cw-shipper for the job's final sample, so
# a job shorter than the collection interval still gets its peak memory and CPU time. Waits at
# most 3 s, prints nothing on success, and never fails the job.
[ -n "${SLURM_JOB_ID:-}" ] || exit 0
bin=${SLURM_CW_SHIPPER_BIN:-/usr/local/bin/slurm-cw-shipper}
[ -x "$bin" ] || exit 0
"$bin" --job-ended "$SLURM_JOB_ID" >/dev/null 2>&1
exit 0
EPILOG_EOF
fi
chmod 0755 "$ROOT$(dirname "$EPILOG")"
log "installed $EPILOG"

write "$CONF_DIR/config.toml" 0644 <<CONFIG_EOF
# Written by on-node-configured.sh (ParallelCluster OnNodeConfigured), rewritten on each run:
# keep site settings as SLURM_CW_* variables in $CONF_DIR/environment. Every key is
# described in infra/systemd/config.toml.example.
cluster_name = "$cluster_name"
namespace = "$namespace"
CONFIG_EOF
log "wrote $CONF_DIR/config.toml"

if [ -n "$unit_src" ]; then
    fetch "$unit_src" "$UNIT" 0644
else
    write "$UNIT" 0644 <<'UNIT_EOF'
# slurm-cw-shipper: ships Slurm metrics to Amazon CloudWatch. One unit for every node: the
# binary detects its role (head node or compute node) itself.
#
# Installed by infra/parallelcluster/on-node-configured.sh to
# /etc/systemd/system/slurm-cw-shipper.service. Site overrides belong in a drop-in
# (systemctl edit slurm-cw-shipper), settings in /etc/slurm-cw-shipper/config.toml, or
# SLURM_CW_* variables in /etc/slurm-cw-shipper/environment.

[Unit]
Description=Slurm metrics shipper for Amazon CloudWatch (slurm-cw-shipper)
Wants=network-online.target
# Slurm's commands need munge; on the head node slurmctld answers them. Ordering only: the
# shipper runs (and reports what it cannot reach) without them. nvidia-persistenced (where it
# exists) has the NVIDIA driver loaded, which DeviceAllow= below needs at start.
After=network-online.target munge.service slurmctld.service slurmd.service nvidia-persistenced.service

[Service]
Type=exec
ExecStart=/usr/local/bin/slurm-cw-shipper --config /etc/slurm-cw-shipper/config.toml
EnvironmentFile=-/etc/slurm-cw-shipper/environment

# Exit status 2 is a bad configuration or command line: restarting cannot fix it.
Restart=always
RestartSec=5s
RestartPreventExitStatus=2
# SIGTERM makes the daemon flush what it holds (within 20 s) and exit 0.
KillSignal=SIGTERM
TimeoutStopSec=30

# The disk spool (/var/lib/slurm-cw-shipper) and the TaskEpilog hook socket
# (/run/slurm-cw-shipper/hook.sock). The socket's directory must be searchable by job users:
# the TaskEpilog runs as the job's user.
StateDirectory=slurm-cw-shipper
StateDirectoryMode=0700
RuntimeDirectory=slurm-cw-shipper
RuntimeDirectoryMode=0755

# A small footprint beside the jobs.
CPUQuota=10%
MemoryMax=128M
TasksMax=64
Nice=10
# Descriptors, not a footprint: each cycle opens files under /proc and the cgroup tree, and
# every hook connection holds one until it is closed, refused ones too (the daemon caps how many
# it serves). At the default soft limit of 1024 a flood of connections to the hook socket could
# make those reads fail with EMFILE.
LimitNOFILE=65536

# --- Hardening -------------------------------------------------------------------------------
# It runs as root, but with only two capabilities: CAP_DAC_READ_SEARCH to read any user's job
# files, and CAP_SYS_PTRACE to read other users' /proc/<pid>/environ, fd and io (the job's
# account, open files, I/O). No CAP_DAC_OVERRIDE: it writes only root's own files. Nothing it runs
# can gain more (NoNewPrivileges: no setuid, no file capabilities).
User=root
CapabilityBoundingSet=CAP_DAC_READ_SEARCH CAP_SYS_PTRACE
NoNewPrivileges=yes

# ProtectSystem=strict makes the file system read-only except the state and runtime
# directories above, the private /tmp and /var/tmp (PrivateTmp) and the API file systems /dev,
# /proc and /sys, which it leaves to other options: ProtectKernelTunables makes /sys and
# /proc/sys read-only, ProtectControlGroups /sys/fs/cgroup, DevicePolicy below limits the
# devices; /dev/shm stays writable. It reads /proc, /sys/fs/cgroup (read-only, not hidden),
# slurm.conf, /opt/slurm/bin or /usr/bin (sinfo, squeue, sdiag), and talks to munge at
# /run/munge/munge.socket.2 (connecting needs write permission on the socket, which a read-only
# mount does not take away).
ProtectSystem=strict
ProtectHome=read-only
PrivateTmp=yes
PrivateMounts=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
# Not ProtectProc=invisible nor ProcSubset=pid: it must see every job's processes in /proc.
# Devices: the pseudo devices (/dev/null, zero, full, random, urandom) and what NVML opens, by
# driver name from /proc/devices (globs are not allowed in DeviceAllow= paths, and paths are
# resolved once at start, before /dev/nvidia<N> may exist). A name allows its whole major:
# current drivers register major 195 as "nvidia" (/dev/nvidia<N>) and "nvidiactl"
# (/dev/nvidiactl), older ones as "nvidia-frontend"; char-nvidia-caps, read-only, is
# /dev/nvidia-caps/ (MIG monitoring; the files are 0400 or 0444, and without CAP_DAC_OVERRIDE
# nothing could open them to write anyway). No nvidia-uvm: CUDA's, not NVML's. Not
# PrivateDevices: its private /dev has no GPU at all. Explicit, too, because ProtectClock implies
# DeviceAllow=char-rtc, which before systemd 252 turned the default policy into an allow-list
# without the GPUs.
DevicePolicy=closed
DeviceAllow=char-nvidiactl rw
DeviceAllow=char-nvidia-frontend rw
DeviceAllow=char-nvidia-caps r
RestrictNamespaces=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
LockPersonality=yes
# AF_NETLINK: glibc's getaddrinfo asks the kernel for the host's addresses.
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK
SystemCallArchitectures=native
SystemCallFilter=@system-service
SystemCallErrorNumber=EPERM
# Not MemoryDenyWriteExecute: NVML (libnvidia-ml.so, loaded at run time when a GPU is present)
# is a closed library whose memory use is not ours to promise.
UMask=0077

[Install]
WantedBy=multi-user.target
UNIT_EOF
fi
log "installed $UNIT"

# --- The service ---------------------------------------------------------------------------
was_active=no
if systemctl is-active --quiet "$SERVICE"; then was_active=yes; fi
systemctl daemon-reload
systemctl enable --now "$SERVICE"
if [ "$was_active" = yes ]; then
    systemctl restart "$SERVICE" # pick up the new binary and configuration
fi
log "$SERVICE enabled and running"

# --- Head node: the TaskEpilog -------------------------------------------------------------
if [ "$node_type" = HeadNode ]; then
    if [ -z "$slurm_conf" ] || ! [ -f "$slurm_conf" ]; then
        die "slurm.conf not found (give --slurm-conf)"
    fi
    conf_files=("$slurm_conf")
    while read -r inc; do
        case $inc in
            /*) inc=$ROOT$inc ;;
            *) inc=$(dirname -- "$slurm_conf")/$inc ;;
        esac
        if [ -f "$inc" ]; then conf_files+=("$inc"); fi
    done < <(awk 'tolower($1) == "include" { print $2 }' "$slurm_conf")

    if existing=$(grep -hiE '^[[:space:]]*TaskEpilog[[:space:]]*=' "${conf_files[@]}"); then
        case $existing in
            *"$EPILOG"*) log "slurm.conf already has TaskEpilog=$EPILOG" ;;
            *) log "slurm.conf already has a TaskEpilog ($existing): left alone; have it run $EPILOG too, so short jobs get their final samples" ;;
        esac
    else
        if [ -s "$slurm_conf" ] && [ -n "$(tail -c 1 "$slurm_conf")" ]; then echo >> "$slurm_conf"; fi
        {
            echo "# slurm-cw-shipper: the final sample of each job (infra/parallelcluster/on-node-configured.sh)"
            echo "TaskEpilog=$EPILOG"
        } >> "$slurm_conf"
        log "added TaskEpilog=$EPILOG to $slurm_conf"
        scontrol reconfigure
        log "scontrol reconfigure done"
    fi
fi
log "done"

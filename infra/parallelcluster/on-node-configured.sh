#!/bin/bash
# ParallelCluster 3 OnNodeConfigured custom action: installs and starts slurm-cw-shipper.
#
#   on-node-configured.sh --binary SRC [--binary-aarch64 SRC] [--sha256 HEX]
#                         [--sha256-aarch64 HEX] [--role head|node] [--namespace NS]
#                         [--cluster-name NAME] [--no-imds-restriction] [--strict]
#                         [--epilog SRC] [--unit SRC] [--slurm-conf PATH] [--edit-slurm-conf]
#
#   --binary SRC           the binary for x86_64 nodes (scripts/release.sh's
#                          dist/slurm-cw-shipper-x86_64): s3://bucket/key (fetched with
#                          `aws s3 cp`) or an absolute path on the node (a shared file system, say)
#   --binary-aarch64 SRC   the binary for aarch64 (Graviton) nodes, likewise
#                          (dist/slurm-cw-shipper-aarch64). `uname -m` picks one of the two, so
#                          the same Args serve x86_64 and Graviton clusters. At least one is
#                          required; a node with none for its machine (or one given the other
#                          machine's binary) is a failure like the others below: logged, nothing
#                          installed, exit 0 unless --strict
#   --sha256 HEX, --sha256-aarch64 HEX
#                          the SHA-256 of --binary, of --binary-aarch64. Without it the file
#                          SHA256SUMS beside the binary (same directory or S3 prefix, as
#                          scripts/release.sh writes dist/SHA256SUMS) must have a line
#                          `<hex>  <the binary's file name>`. A binary with another checksum, or
#                          none, is not installed. SHA256SUMS catches a wrong or partial upload;
#                          --sha256 in the cluster config also pins the build
#   --role head|node       the node's role (the shipper's `role`); default: ParallelCluster's
#                          node type in /etc/parallelcluster/cfnconfig (on a login node it does
#                          nothing)
#   --namespace NS         CloudWatch namespace; must be the terraform module's `namespace`.
#                          Default: none written, so the shipper uses the cluster's own,
#                          Slurm/<cluster name>, as the module does. `--namespace Slurm` keeps
#                          the namespace older versions shared (see the README, "Moving an
#                          existing cluster")
#   --cluster-name NAME    the ClusterName dimension (default: slurm.conf ClusterName, else the
#                          ParallelCluster cluster name); must match the terraform module's
#   --no-imds-restriction  compute nodes: leave instance metadata open to every user (see IMDS)
#   --strict               fail with a non-zero status (1; 2 for bad arguments) instead of 0
#   --epilog SRC           the TaskEpilog script (default: the copy of infra/slurm/task-epilog.sh
#                          built into this script)
#   --unit SRC             the systemd unit (default: the copy of
#                          infra/systemd/slurm-cw-shipper.service built into this script)
#   --slurm-conf PATH      slurm.conf (default /opt/slurm/etc/slurm.conf, else
#                          /etc/slurm/slurm.conf)
#   --edit-slurm-conf      head node: add TaskEpilog=/opt/slurm-cw-shipper/task-epilog.sh to
#                          slurm.conf when no TaskEpilog is set, and run `scontrol reconfigure`.
#                          Only for clusters without Scheduling/SlurmSettings/CustomSlurmSettings
#                          (ParallelCluster before 3.6); otherwise set TaskEpilog there, as
#                          cluster-config.example.yaml does, and slurm.conf stays
#                          ParallelCluster's
#
# It installs /opt/slurm-cw-shipper/task-epilog.sh first (a cluster-wide TaskEpilog= then finds
# it even on a node where the rest fails; without the daemon it does nothing),
# /usr/local/bin/slurm-cw-shipper, /etc/slurm-cw-shipper/config.toml (cluster_name, role,
# namespace when given; keep site settings as SLURM_CW_* variables in /etc/slurm-cw-shipper/environment) and the
# systemd unit, and enables and starts slurm-cw-shipper.
#
# It never fails a node's boot: ParallelCluster fails the boot when an OnNodeConfigured action
# exits non-zero. Any failure (bad arguments, a download, a checksum, systemd) is written to
# /var/log/slurm-cw-shipper-bootstrap.log and as one line to the journal
# (`journalctl -t slurm-cw-shipper`), what the failed step would have replaced stays as it was
# (the binary is replaced only once fetched and verified), and the exit status is 0, unless
# --strict.
#
# Running it again (a cluster update, by hand) is safe: it changes only what differs, fetches the
# binary only when the installed one has another checksum, and restarts the service only when
# its binary, unit or configuration changed.
#
# IMDS. The instance role's credentials are served by the instance metadata service
# (169.254.169.254) to any local user; with them a job could write metrics and job records as
# the node. On compute nodes (role node) it adds, unless --no-imds-restriction, an iptables rule
# (`-m owner ! --uid-owner 0 -j REJECT` on OUTPUT to 169.254.169.254; ip6tables for
# fd00:ec2::254 where there is one) and a oneshot unit, slurm-cw-imds-restrict.service, that adds
# it again at boot (iptables rules do not survive a reboot); each rule is checked for before it
# is added. The price: jobs can no longer use the instance role (`aws s3 cp` in a job script, an
# SDK falling back to the instance profile) nor read instance metadata (instance type, zone)
# from IMDS; give jobs credentials of their own, or pass --no-imds-restriction (which takes the
# rule and the unit away again) and keep the instance role to what jobs may do. Containers on a
# bridged network (forwarded traffic, not OUTPUT) are not covered. On the head node it leaves
# IMDS to ParallelCluster: HeadNode/Imds/Secured (default true) already restricts the instance
# profile's credentials there to a few superusers. A failure to add the rule is logged, never
# fatal.
#
# Every path is under $ROOT (default empty), and systemctl, scontrol, aws, iptables, ip6tables,
# logger and uname are looked up in PATH (then $ROOT/opt/slurm/bin), so that
# tests/infra/test_bootstrap.py can run it in a temporary root with recording fakes.
set -uo pipefail

ROOT=${ROOT:-}
PATH="$PATH:$ROOT/opt/slurm/bin"
umask 022

BIN=/usr/local/bin/slurm-cw-shipper
EPILOG=/opt/slurm-cw-shipper/task-epilog.sh
CONF_DIR=/etc/slurm-cw-shipper
UNIT=/etc/systemd/system/slurm-cw-shipper.service
SERVICE=slurm-cw-shipper
IMDS_SERVICE=slurm-cw-imds-restrict.service
IMDS_UNIT=/etc/systemd/system/$IMDS_SERVICE
LOG=/var/log/slurm-cw-shipper-bootstrap.log
TAG=slurm-cw-shipper
USAGE="usage: ${0##*/} --binary SRC [--binary-aarch64 SRC] [--sha256 HEX] [--sha256-aarch64 HEX] [--role head|node] [--namespace NS] [--cluster-name NAME] [--no-imds-restriction] [--strict] [--epilog SRC] [--unit SRC] [--slurm-conf PATH] [--edit-slurm-conf]"

log_file=$ROOT$LOG
mkdir -p -- "${log_file%/*}" 2>/dev/null

# log MESSAGE: standard output (ParallelCluster keeps it) and the log file.
log() {
    printf 'slurm-cw-shipper setup: %s\n' "$*"
    printf '%s %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" >> "$log_file" 2>/dev/null
    return 0
}

# journal PRIORITY MESSAGE: one line to the system journal.
journal() {
    if command -v logger >/dev/null 2>&1; then
        logger -t "$TAG" -p "user.$1" -- "$2" >/dev/null 2>&1
    fi
    return 0
}

# Why the run failed, for the one journal line (set in the subshell that does the work).
reason_file=$(mktemp 2>/dev/null) || reason_file=/tmp/slurm-cw-shipper-setup.$$

# fail STATUS MESSAGE: the run fails; what is installed stays as it is.
fail() {
    local status=$1
    shift
    log "failed: $*" >&2
    printf '%s' "$*" > "$reason_file"
    exit "$status"
}

usage_error() {
    printf '%s\n' "$USAGE" >&2
    fail 2 "bad arguments: $*"
}

# --- Arguments -------------------------------------------------------------------------------
strict=no
for arg in "$@"; do
    if [ "$arg" = --strict ]; then strict=yes; fi
done

parse_args() {
    binary_x86_64='' binary_aarch64='' sha256_x86_64='' sha256_aarch64='' role=''
    namespace='' cluster_name='' epilog_src='' unit_src='' slurm_conf=''
    imds_restriction=yes edit_slurm_conf=no
    local opt val
    while [ $# -gt 0 ]; do
        opt=$1
        case $opt in
            --*=*) val=${opt#*=}; opt=${opt%%=*}; shift ;;
            --binary | --binary-aarch64 | --sha256 | --sha256-aarch64 | --role | --namespace | \
                --cluster-name | --epilog | --unit | --slurm-conf)
                [ $# -ge 2 ] || usage_error "$opt needs a value"
                val=$2; shift 2 ;;
            --no-imds-restriction | --strict | --edit-slurm-conf) val=''; shift ;;
            -h | --help) sed -n '2,/^set -uo/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
            *) usage_error "unknown argument: $opt" ;;
        esac
        case $opt in
            --binary) binary_x86_64=$val ;;
            --binary-aarch64) binary_aarch64=$val ;;
            --sha256) sha256_x86_64=$val ;;
            --sha256-aarch64) sha256_aarch64=$val ;;
            --role) role=$val ;;
            --namespace) namespace=$val ;;
            --cluster-name) cluster_name=$val ;;
            --epilog) epilog_src=$val ;;
            --unit) unit_src=$val ;;
            --slurm-conf) slurm_conf=$val ;;
            --no-imds-restriction) imds_restriction=no ;;
            --strict) ;;
            --edit-slurm-conf) edit_slurm_conf=yes ;;
            *) usage_error "unknown argument: $opt" ;;
        esac
    done
    if [ -z "$binary_x86_64" ] && [ -z "$binary_aarch64" ]; then
        usage_error "--binary (or --binary-aarch64) is required"
    fi
    local src
    for src in "$binary_x86_64" "$binary_aarch64" "$epilog_src" "$unit_src"; do
        case $src in
            '' | s3://?*/?* | /*) ;;
            *) usage_error "$src: give an s3://bucket/key URL or an absolute path" ;;
        esac
    done
    local hex
    for hex in "$sha256_x86_64" "$sha256_aarch64"; do
        if [ -n "$hex" ] && ! [[ $hex =~ ^[0-9A-Fa-f]{64}$ ]]; then
            usage_error "bad SHA-256 '$hex': 64 hexadecimal digits"
        fi
    done
    case $role in
        '' | head | node) ;;
        *) usage_error "bad role '$role': head or node" ;;
    esac
    if [ -n "$cluster_name" ]; then check_cluster_name; fi
    if [ -n "$namespace" ] && { ! [[ $namespace =~ ^[A-Za-z0-9.#:_/\ -]{1,255}$ ]] ||
        [[ $namespace == AWS/* || $namespace == :* ]]; }; then
        usage_error "bad namespace '$namespace': letters, digits, spaces and . # : _ / -, not AWS/... nor starting with :"
    fi
}

check_cluster_name() {
    [[ $cluster_name =~ ^[A-Za-z0-9][A-Za-z0-9_.-]*$ ]] || usage_error "bad cluster name '$cluster_name'"
}

# --- Files -----------------------------------------------------------------------------------
tmp_files=()
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
    if [ ${#tmp_files[@]} -gt 0 ]; then rm -rf -- "${tmp_files[@]}"; fi
}

sha256_of() { sha256sum -- "$1" | cut -d' ' -f1; }

# elf_machine FILE: x86_64 or aarch64 for a 64-bit little-endian ELF executable of that machine
# (from its header's e_ident and e_machine), else what it is.
elf_machine() {
    local head
    head=$(od -An -tx1 -N20 -- "$1" | tr -d ' \n')
    case $head in
        7f454c460201????????????????????????3e00) echo x86_64 ;;
        7f454c460201????????????????????????b700) echo aarch64 ;;
        7f454c46*) echo "an ELF file for another machine" ;;
        *) echo "not an ELF file" ;;
    esac
}

# fetch SRC DEST: SRC (s3://... or an absolute path on this node) to the file DEST. Returns 1,
# with the reason logged, when it cannot.
fetch() {
    local src=$1 dest=$2 out
    case $src in
        s3://*)
            local args=(s3 cp --only-show-errors)
            if [ -n "$region" ]; then args+=(--region "$region"); fi
            if ! out=$(aws "${args[@]}" "$src" "$dest" 2>&1); then
                log "aws s3 cp $src: $out"
                return 1
            fi ;;
        *)
            if ! [ -f "$ROOT$src" ]; then
                log "$src: no such file"
                return 1
            fi
            cp -- "$ROOT$src" "$dest" || return 1 ;;
    esac
    [ -s "$dest" ] || { log "$src is empty"; return 1; }
}

# install_from TMP DEST MODE: TMP becomes DEST (under $ROOT) unless DEST already has its
# content; sets wrote=yes or no.
install_from() {
    local tmp=$1 dest=$ROOT$2 mode=$3
    if [ -f "$dest" ] && [ "$(sha256_of "$tmp")" = "$(sha256_of "$dest")" ]; then
        rm -f -- "$tmp"
        if [ "$(stat -c %a -- "$dest")" != "${mode#0}" ]; then chmod "$mode" -- "$dest"; fi
        wrote=no
    else
        chmod "$mode" -- "$tmp"
        mv -f -- "$tmp" "$dest"
        wrote=yes
    fi
}

# new_file DEST: a temporary file beside DEST (under $ROOT), on the same file system.
new_file() {
    local dest=$ROOT$1
    mkdir -p -- "${dest%/*}"
    new=$dest.new.$$
    tmp_files+=("$new")
}

# install_text DEST MODE: standard input to DEST; sets wrote.
install_text() {
    new_file "$1"
    cat > "$new"
    install_from "$new" "$1" "$2"
}

# install_fetched SRC DEST MODE: SRC to DEST; sets wrote.
install_fetched() {
    new_file "$2"
    fetch "$1" "$new" || fail 1 "could not fetch $1"
    install_from "$new" "$2" "$3"
}

# --- IMDS --------------------------------------------------------------------------------------
# The rules: iptables for IPv4 (required), ip6tables for IPv6 (best effort: IMDS answers on IPv6
# only where the instance enables it).
IMDS_ENDPOINTS=("iptables 169.254.169.254/32" "ip6tables fd00:ec2::254/128")

imds_rule() { printf '%s' "OUTPUT -d $1 -m owner ! --uid-owner 0 -j REJECT"; }

imds_problem() {
    log "warning: $*"
    journal warning "IMDS stays open to job users: $*"
}

restrict_imds() {
    local entry tool addr out spec
    for entry in "${IMDS_ENDPOINTS[@]}"; do
        read -r tool addr <<< "$entry"
        read -r -a spec <<< "$(imds_rule "$addr")"
        if ! command -v "$tool" >/dev/null 2>&1; then
            if [ "$tool" = iptables ]; then imds_problem "iptables not found"; else log "$tool not found: IMDS over IPv6 not restricted"; fi
        elif "$tool" -w -C "${spec[@]}" >/dev/null 2>&1; then
            log "IMDS ($addr) already restricted to root"
        elif out=$("$tool" -w -I "${spec[@]}" 2>&1); then
            log "IMDS ($addr) restricted to root: $tool -I ${spec[*]}"
        elif [ "$tool" = iptables ]; then
            imds_problem "$tool -I ${spec[*]}: $out"
        else
            log "IMDS over IPv6 not restricted: $tool: $out"
        fi
    done

    # Again at every boot, before slurmd takes jobs and after whatever restores firewall rules.
    local v4 v6
    v4=$(imds_rule 169.254.169.254/32)
    v6=$(imds_rule fd00:ec2::254/128)
    install_text "$IMDS_UNIT" 0644 <<IMDS_UNIT_EOF || return 1
# Written by on-node-configured.sh (slurm-cw-shipper): only root may reach the instance metadata
# service and so the instance role's credentials; iptables rules do not survive a reboot.
# --no-imds-restriction removes it.
[Unit]
Description=Instance metadata (IMDS) for root only (slurm-cw-shipper)
After=firewalld.service iptables.service ip6tables.service nftables.service netfilter-persistent.service
Before=slurmd.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -c 'iptables -w -C $v4 2>/dev/null || iptables -w -I $v4'
ExecStart=-/bin/sh -c 'ip6tables -w -C $v6 2>/dev/null || ip6tables -w -I $v6'

[Install]
WantedBy=multi-user.target
IMDS_UNIT_EOF
    if [ "$wrote" = yes ]; then
        systemctl daemon-reload || return 1
        log "installed $IMDS_UNIT"
    fi
    if ! systemctl is-enabled --quiet "$IMDS_SERVICE" 2>/dev/null; then
        systemctl enable "$IMDS_SERVICE" || return 1
        log "enabled $IMDS_SERVICE (the rule again at boot)"
    fi
}

unrestrict_imds() {
    local entry tool addr spec n
    for entry in "${IMDS_ENDPOINTS[@]}"; do
        read -r tool addr <<< "$entry"
        read -r -a spec <<< "$(imds_rule "$addr")"
        command -v "$tool" >/dev/null 2>&1 || continue
        n=0
        while [ $n -lt 10 ] && "$tool" -w -C "${spec[@]}" >/dev/null 2>&1; do
            "$tool" -w -D "${spec[@]}" || return 1
            log "removed the IMDS rule for $addr (--no-imds-restriction)"
            n=$((n + 1))
        done
    done
    if [ -f "$ROOT$IMDS_UNIT" ]; then
        systemctl disable "$IMDS_SERVICE" || return 1
        rm -f -- "$ROOT$IMDS_UNIT"
        systemctl daemon-reload || return 1
        log "removed $IMDS_UNIT (--no-imds-restriction)"
    fi
}

# --- The work --------------------------------------------------------------------------------
main() {
    parse_args "$@"

    # Where we are.
    local cfnconfig=$ROOT/etc/parallelcluster/cfnconfig node_type=''
    region=''
    cfn_value() { sed -n "s/^$1=//p" "$cfnconfig" | tail -n 1 | tr -d "\"'[:space:]"; }
    if [ -r "$cfnconfig" ]; then
        node_type=$(cfn_value cfn_node_type)
        region=$(cfn_value cfn_region)
    fi
    if [ -z "$role" ]; then
        [ -r "$cfnconfig" ] || fail 1 "no --role, and no $cfnconfig to tell the node type: give --role head or --role node"
        case $node_type in
            HeadNode) role='head' ;;
            ComputeFleet) role='node' ;;
            LoginNode) log "login node: nothing to do"; exit 0 ;;
            *) fail 1 "unknown cfn_node_type '$node_type' in $cfnconfig: give --role" ;;
        esac
    fi

    # IMDS first: it matters whatever else fails.
    if [ "$role" = node ] && [ "$imds_restriction" = yes ]; then
        restrict_imds || imds_problem "setting up $IMDS_SERVICE failed"
    elif [ "$role" = node ]; then
        unrestrict_imds || log "warning: could not take the IMDS restriction away"
        log "IMDS left open to every user (--no-imds-restriction)"
    else
        log "head node: IMDS left to ParallelCluster (HeadNode/Imds/Secured)"
    fi

    # The TaskEpilog, built in (infra/slurm/task-epilog.sh; update-embedded.py copies it here)
    # so that a cluster needs only this script and the binary.
    if [ -n "$epilog_src" ]; then
        install_fetched "$epilog_src" "$EPILOG" 0755
    else
        install_text "$EPILOG" 0755 <<'EPILOG_EOF'
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
    chmod 0755 "$ROOT${EPILOG%/*}"
    if [ "$wrote" = yes ]; then log "installed $EPILOG"; fi

    if [ -n "$slurm_conf" ]; then
        slurm_conf=$ROOT$slurm_conf
    else
        local f
        for f in "$ROOT/opt/slurm/etc/slurm.conf" "$ROOT/etc/slurm/slurm.conf"; do
            if [ -f "$f" ]; then slurm_conf=$f; break; fi
        done
    fi
    if [ -z "$cluster_name" ] && [ -n "$slurm_conf" ] && [ -r "$slurm_conf" ]; then
        cluster_name=$(awk -F= 'tolower($1) ~ /^[ \t]*clustername[ \t]*$/ { v = $2; sub(/#.*/, "", v); gsub(/[ \t"]/, "", v); print v }' "$slurm_conf" | tail -n 1)
    fi
    if [ -z "$cluster_name" ] && [ -r "$cfnconfig" ]; then cluster_name=$(cfn_value stack_name); fi
    [ -n "$cluster_name" ] || fail 1 "no cluster name: give --cluster-name, or set ClusterName in slurm.conf"
    check_cluster_name
    log "role $role, cluster $cluster_name, namespace ${namespace:-"the cluster's own (the shipper's default)"}"

    # The binary for this machine.
    local machine src want
    machine=$(uname -m)
    case $machine in
        x86_64 | amd64) machine=x86_64 src=$binary_x86_64 want=$sha256_x86_64 ;;
        aarch64 | arm64) machine=aarch64 src=$binary_aarch64 want=$sha256_aarch64 ;;
        *) src='' want='' ;;
    esac
    if [ -z "$src" ]; then
        fail 1 "no slurm-cw-shipper binary for this machine ($machine): --binary is x86_64's, --binary-aarch64 aarch64's; nothing installed"
    fi

    # Its checksum: given, or from SHA256SUMS beside it.
    if [ -n "$want" ]; then
        want=$(printf '%s' "$want" | tr 'A-F' 'a-f')
    else
        local sums=${src%/*}/SHA256SUMS name=${src##*/}
        new_file "$BIN.SHA256SUMS"
        fetch "$sums" "$new" || fail 1 "no checksum for $src: give --sha256, or put SHA256SUMS (scripts/release.sh writes it) beside it"
        want=$(awk -v f="$name" '{ n = $2; sub(/^\*/, "", n); if (n == f) { print tolower($1); exit } }' "$new")
        rm -f -- "$new"
        [[ $want =~ ^[0-9a-f]{64}$ ]] || fail 1 "$sums has no SHA-256 of $name: give --sha256, or upload the binary under the name SHA256SUMS gives it"
    fi

    local changed=no got
    if [ -f "$ROOT$BIN" ] && [ "$(sha256_of "$ROOT$BIN")" = "$want" ]; then
        log "$BIN is already $src (sha256 $want)"
        if [ "$(stat -c %a -- "$ROOT$BIN")" != 755 ]; then chmod 0755 -- "$ROOT$BIN"; fi
    else
        new_file "$BIN"
        fetch "$src" "$new" || fail 1 "could not fetch $src: $BIN left as it was"
        got=$(sha256_of "$new")
        if [ "$got" != "$want" ]; then
            rm -f -- "$new"
            fail 1 "$src has sha256 $got, not $want: refused, $BIN left as it was"
        fi
        # SHA256SUMS is read by file name: --binary-aarch64 naming the x86_64 file passes with
        # that file's own line, and the service would then fail at every start.
        got=$(elf_machine "$new")
        if [ "$got" != "$machine" ]; then
            rm -f -- "$new"
            fail 1 "$src is not a binary for $machine ($got): refused, $BIN left as it was"
        fi
        install_from "$new" "$BIN" 0755
        changed=yes
        log "installed $BIN from $src (sha256 $want)"
    fi

    # No namespace line unless given: the shipper then uses the cluster's own.
    local namespace_line=''
    if [ -n "$namespace" ]; then namespace_line="namespace = \"$namespace\""$'\n'; fi
    install_text "$CONF_DIR/config.toml" 0644 <<CONFIG_EOF
# Written by on-node-configured.sh (ParallelCluster OnNodeConfigured), rewritten when it runs:
# keep site settings as SLURM_CW_* variables in $CONF_DIR/environment. Every key is
# described in infra/systemd/config.toml.example.
cluster_name = "$cluster_name"
${namespace_line}role = "$role"
CONFIG_EOF
    if [ "$wrote" = yes ]; then changed=yes; log "wrote $CONF_DIR/config.toml"; fi

    # The unit, built in like the TaskEpilog (infra/systemd/slurm-cw-shipper.service).
    if [ -n "$unit_src" ]; then
        install_fetched "$unit_src" "$UNIT" 0644
    else
        install_text "$UNIT" 0644 <<'UNIT_EOF'
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
    if [ "$wrote" = yes ]; then
        changed=yes
        log "installed $UNIT"
        systemctl daemon-reload || fail 1 "systemctl daemon-reload failed"
    fi

    # The service: started if it is not running, restarted if something it runs changed.
    if ! systemctl is-enabled --quiet "$SERVICE" 2>/dev/null; then
        systemctl enable --now "$SERVICE" || fail 1 "systemctl enable --now $SERVICE failed (journalctl -u $SERVICE)"
        log "$SERVICE enabled and started"
    elif ! systemctl is-active --quiet "$SERVICE"; then
        systemctl start "$SERVICE" || fail 1 "systemctl start $SERVICE failed (journalctl -u $SERVICE)"
        log "$SERVICE started"
    elif [ "$changed" = yes ]; then
        systemctl restart "$SERVICE" || fail 1 "systemctl restart $SERVICE failed (journalctl -u $SERVICE)"
        log "$SERVICE restarted"
    else
        log "$SERVICE running, nothing changed"
    fi

    if [ "$edit_slurm_conf" = yes ] && [ "$role" = head ]; then
        add_task_epilog
    fi
    log "done"
}

# Head node, --edit-slurm-conf: TaskEpilog= in slurm.conf unless one is set there or in a file
# it includes.
add_task_epilog() {
    if [ -z "$slurm_conf" ] || ! [ -f "$slurm_conf" ]; then
        fail 1 "slurm.conf not found (give --slurm-conf)"
    fi
    local conf_files=("$slurm_conf") inc existing
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
        scontrol reconfigure || fail 1 "scontrol reconfigure failed"
        log "scontrol reconfigure done"
    fi
}

# The work runs in a subshell that stops at the first failure; this shell reports it.
(
    set -Eeuo pipefail
    trap cleanup EXIT
    trap 'fail 1 "line $LINENO: \`$BASH_COMMAND\` exited $?"' ERR
    main "$@"
)
status=$?
if [ "$status" -eq 0 ]; then
    rm -f -- "$reason_file"
    exit 0
fi
reason=$(cat -- "$reason_file" 2>/dev/null)
rm -f -- "$reason_file"
journal err "setup failed: ${reason:-exit status $status} (see $LOG)"
if [ "$strict" = yes ]; then
    exit "$status"
fi
log "not failing the node's boot (--strict would)"
exit 0

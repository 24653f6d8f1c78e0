# shellcheck shell=bash
# The caller sets the variables service_main reads (see there).
# shellcheck disable=SC2154
# What the benches' loopback services share (localstack.sh, prometheus.sh,
# victoria-metrics.sh): start one in its own process group and wait until it answers, stop it,
# and unpack a package of Debian trixie's. The caller defines log().
#
#   service_start PIDFILE LOGFILE READY TRIES PAUSE -- COMMAND...
#       starts COMMAND (setsid, nohup, no stdin, output to LOGFILE) and calls READY (a function
#       or command) up to TRIES times PAUSE seconds apart: returns once it answers; exits 1 with
#       the log's last lines when the process ends first or never answers.
#   service_stop PIDFILE
#       TERM to its process group, KILL 10 s later.
#   trixie_package PACKAGE DIR
#       downloads PACKAGE's .deb with apt in the Debian trixie root (made by slurm-trixie.sh
#       the first time: needs root) and unpacks it into DIR, replaced whole.

service_start() {
    local pidf=$1 logf=$2 ready=$3 tries=$4 pause=$5 i
    shift 5
    [ "${1:-}" = -- ] && shift
    setsid nohup "$@" >"$logf" 2>&1 </dev/null &
    echo $! >"$pidf"
    for ((i = 0; i < tries; i++)); do
        if "$ready"; then return 0; fi
        if ! kill -0 "$(cat "$pidf")" 2>/dev/null; then
            log "exited during start; last lines of $logf:"
            tail -n 20 "$logf" >&2
            exit 1
        fi
        sleep "$pause"
    done
    log "not answering after $tries tries $pause s apart; see $logf"
    exit 1
}

service_stop() {
    local pidf=$1 pid i
    [ -f "$pidf" ] || return 0
    pid=$(cat "$pidf")
    # setsid made it a process-group leader: stop the group (some fork helpers).
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$pid" 2>/dev/null || true
    rm -f "$pidf"
}

trixie_package() {
    local package=$1 dir=$2
    local here_ root dl deb get
    here_=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
    root=${SLURM_TRIXIE_ROOT:-/var/cache/slurm-cw-bench/trixie}
    if [ ! -x "$root/usr/bin/apt-get" ]; then
        log "making the Debian trixie root to download $package with (once per machine)"
        SLURM_TRIXIE_ROOT=$root bash "$here_/slurm-trixie.sh" root --version 24.11
    fi
    log "downloading trixie's $package with apt in $root"
    dl=$(mktemp -d "$root/tmp/$package-deb.XXXXXX")
    # apt's _apt user cannot write the directory: the download runs as root, said once by apt.
    get="cd /tmp/$(basename "$dl") && apt-get download -q $package"
    if ! chroot "$root" sh -c "$get" >"$dl.log" 2>&1; then
        chroot "$root" apt-get update -q >>"$dl.log" 2>&1 || true
        chroot "$root" sh -c "$get" >>"$dl.log" 2>&1 || {
            log "apt-get download failed; see $dl.log"; exit 1; }
    fi
    deb=$(find "$dl" -name "${package}_*.deb" | head -n 1)
    [ -n "$deb" ] || { log "no .deb downloaded; see $dl.log"; exit 1; }
    rm -rf --one-file-system "$dir.new"
    mkdir -p "$dir.new"
    dpkg -x "$deb" "$dir.new"
    rm -rf --one-file-system "$dir"
    mv "$dir.new" "$dir"
    rm -rf --one-file-system "$dl" "$dl.log"
}

# service_main ACTION: start|stop|env|status of a loopback service that keeps its data under
# $data (emptied at each start and stop: series of an earlier run would answer a test's query).
# The caller sets url, bench, pidf, logf and data, and defines ready, print_env,
# install_if_missing and command_line (which writes what the service reads and sets the array
# `cmd` to its command line).
service_main() {
    case "${1:-start}" in
        start)
            if ready; then
                log "already running on $url"
                print_env
                return
            fi
            install_if_missing
            mkdir -p "$bench"
            rm -rf --one-file-system "$data"
            local cmd=()
            command_line
            service_start "$pidf" "$logf" ready 300 0.1 -- "${cmd[@]}"
            log "ready on $url (log: $logf)"
            print_env
            ;;
        stop)
            service_stop "$pidf"
            rm -rf --one-file-system "$data"
            log "stopped"
            ;;
        env) print_env ;;
        status) if ready; then echo "up on $url"; else echo "down"; exit 1; fi ;;
        *) echo "usage: $0 start|stop|env|status" >&2; exit 2 ;;
    esac
}

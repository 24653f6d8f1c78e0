#!/usr/bin/env bash
# Real Slurm on cgroup v2, in a VM: this host's kernel mounts cgroup v1 only, and users run v2.
# A Debian root made once with debootstrap (Slurm, munge, python3, a kernel) becomes an ext4
# image; qemu (TCG: this host's KVM cannot run a stock kernel) boots it with cgroup v2, a
# oneshot unit runs the script found on a second disk, and the VM powers off. See
# ../shared/REFERENCE.md section 12.
#
#   vm.sh build --version 24.11|26.05
#       the image, cached in /var/cache/slurm-cw-bench/vm-<version>/ and made again only when
#       its recipe (this file's build functions and scripts/bench/vm/bench-*) changes.
#   vm.sh run --version V --in DIR --out DIR [--limit SECONDS]
#       boots the image with DIR's files on the second disk (in/), the guest runs in/guest.sh;
#       waits for power-off (at most --limit s, default 900) and leaves what the guest wrote
#       (out/) in the out DIR, with the serial console in console.log.
#   vm.sh test --version V --out DIR [--shipper BIN] [--limit SECONDS]
#       run with the node role's scenario: vm/guest.sh, workload.py, the TaskEpilog and the
#       shipper (default target/debug/slurm-cw-shipper) as its input.
#
# 24.11 is Debian 13 (trixie), 26.05 Debian sid. Runs as root (debootstrap, chroot).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/bench/slurm-common.sh
source "$here/slurm-common.sh"

# What the guest needs: systemd and dbus (slurmd asks systemd for its delegated scope), Slurm,
# munge, python3 for workload.py, iproute2 for the dummy link, initramfs-tools for the kernel,
# ca-certificates (the AWS SDK in --check wants a trust store, as every real node has one).
packages=systemd-sysv,udev,dbus,kmod,iproute2,procps,ca-certificates,initramfs-tools,slurmctld,slurmd,slurm-client,munge,python3

log() { printf 'vm-bench %s: %s\n' "${version:-?}" "$*" >&2; }
die() { log "$*"; exit 1; }

# The kernel in the root: modules for a virtio disk only, so the initrd is small and boots
# fast under TCG. initramfs-tools is in the root already (sid's kernel will not install
# without an initramfs generator, and debootstrap does not pick one).
install_kernel() {
    local r=$1 what
    printf 'MODULES=list\nCOMPRESS=gzip\n' > "$r/etc/initramfs-tools/conf.d/slurm-cw-bench.conf"
    printf 'virtio_pci\nvirtio_blk\next4\n' >> "$r/etc/initramfs-tools/modules"
    mount -t proc proc "$r/proc"
    for what in sys dev; do mount --rbind "/$what" "$r/$what"; mount --make-rslave "$r/$what"; done
    local rc=0
    DEBIAN_FRONTEND=noninteractive chroot "$r" apt-get install -y -q --no-install-recommends \
        linux-image-amd64 >> "$dir/build.log" 2>&1 || rc=$?
    unmount_under "$r/dev"; unmount_under "$r/sys"; unmount_under "$r/proc"
    [ $rc -eq 0 ] || die "installing the kernel failed; see $dir/build.log"
}

# What the guest is beyond its packages: the run unit, a user for the jobs, a host name that
# resolves to the dummy link's address, Slurm's and munge's units left to the guest script.
configure_root() {
    local r=$1
    echo vm1 > "$r/etc/hostname"
    printf '127.0.0.1 localhost\n169.254.77.1 vm1\n' > "$r/etc/hosts"
    echo '/dev/vda / ext4 rw,relatime 0 1' > "$r/etc/fstab"
    install -m 755 "$here/vm/bench-boot.sh" "$r/usr/local/sbin/bench-boot"
    install -m 644 "$here/vm/bench.service" "$r/etc/systemd/system/bench.service"
    chroot "$r" systemctl enable bench.service >> "$dir/build.log" 2>&1
    chroot "$r" systemctl disable slurmctld.service slurmd.service munge.service >> "$dir/build.log" 2>&1 || true
    # Timers and services that only slow a TCG boot.
    chroot "$r" systemctl mask apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer \
        fstrim.timer systemd-networkd-wait-online.service >> "$dir/build.log" 2>&1 || true
    chroot "$r" useradd -m -u 1000 -s /bin/bash alice
    chroot "$r" passwd -d root >/dev/null
    rm -rf "$r"/var/cache/apt/archives/*.deb "$r"/var/lib/apt/lists/*_Packages
}

image_recipe() {
    {
        declare -f install_kernel configure_root make_image
        echo "$packages $suite"
        cat "$here/vm/bench-boot.sh" "$here/vm/bench.service"
    } | sha256sum | cut -d' ' -f1
}

make_image() {
    local r=$dir/root.new m v kernels initrds
    remove_tree "$r"
    rm -f "$dir/build.log"
    m=$(debian_mirror "${SLURM_VM_MIRROR:-}")
    log "debootstrap $suite from $m"
    debootstrap --variant=minbase --include="$packages" "$suite" "$r" "$m" >> "$dir/build.log" 2>&1 \
        || { unmount_under "$r"; die "debootstrap failed; see $dir/build.log"; }
    unmount_under "$r"
    v=$(chroot "$r" /usr/sbin/slurmctld -V | awk '{print $2}')
    case "$v" in
        "$version".*) ;;
        *) die "$suite's slurmctld is $v, not $version" ;;
    esac
    log "kernel and initrd (Slurm $v)"
    install_kernel "$r"
    configure_root "$r"
    kernels=("$r"/boot/vmlinuz-*)
    initrds=("$r"/boot/initrd.img-*)
    cp "${kernels[-1]}" "$dir/vmlinuz"
    cp "${initrds[-1]}" "$dir/initrd.img"
    log "ext4 image"
    rm -f "$dir/root.img"
    mke2fs -q -t ext4 -L root -d "$r" "$dir/root.img" 3G > /dev/null
    echo "$v" > "$dir/slurm-version"
    remove_tree "$r"
}

build() {
    local want t0
    mkdir -p "$dir"
    # One build of an image at a time (two test runs starting together wait for one image).
    exec 9> "$dir.lock"
    flock 9
    want=$(image_recipe)
    if [ -f "$dir/root.img" ] && [ "$(cat "$dir/recipe.sha256" 2>/dev/null)" = "$want" ]; then
        log "image cached ($dir, Slurm $(cat "$dir/slurm-version"))"
        return
    fi
    command -v debootstrap >/dev/null || die "debootstrap is missing: apt-get install debootstrap"
    t0=$SECONDS
    rm -f "$dir/recipe.sha256"
    make_image
    echo "$want" > "$dir/recipe.sha256"
    log "image made in $((SECONDS - t0)) s"
}

# Copies the guest's console lines that say `vm-bench:` to standard error, with the time since
# the VM started; everything goes to console.log.
follow_console() {
    local t0=$1 line
    while IFS= read -r line; do
        line=${line%$'\r'}
        printf '%s\n' "$line" >> "$out/console.log"
        case "$line" in
            *vm-bench:*) log "+$((SECONDS - t0)) s ${line#*vm-bench: }" ;;
        esac
    done
}

run() {
    [ -d "$in" ] || die "--in DIR is needed (a directory with guest.sh)"
    [ -n "$out" ] || die "--out DIR is needed"
    [ -f "$dir/root.img" ] || die "no image in $dir: run \`$0 build --version $version\` first"
    command -v qemu-system-x86_64 >/dev/null || die "qemu is missing: apt-get install qemu-system-x86"
    local attempt rc
    # A guest kernel that panics (seen once under TCG: an int3 oops in sched_clock_cpu while
    # the host was busy, the emulator's fault, not the scenario's) powers off at once (panic=1,
    # -no-reboot) and boots again, once.
    for attempt in 1 2; do
        rc=0
        boot || rc=$?
        if [ $rc -ne 0 ] && [ "$attempt" = 1 ] && grep -q "Kernel panic" "$out/console.log" 2>/dev/null; then
            log "the guest kernel panicked (see $out/console.log.1); booting again"
            mv "$out/console.log" "$out/console.log.1.keep"
            continue
        fi
        break
    done
    [ -f "$out/console.log.1.keep" ] && mv "$out/console.log.1.keep" "$out/console.log.1"
    [ $rc -eq 0 ] || die "qemu ended with status $rc (time limit: $limit s); see $out/console.log"
    [ -f "$out/rc" ] || die "the guest wrote no exit status; see $out/console.log"
    [ "$(cat "$out/rc")" = 0 ] || die "the guest script failed ($(cat "$out/rc")); see $out/guest.log"
}

# One boot of the scenario; its status is qemu's, or 3 when the kernel panicked.
boot() {
    local stage io t0 rc=0 keep=""
    [ -f "$out/console.log.1.keep" ] && keep=$(mktemp) && mv "$out/console.log.1.keep" "$keep"
    rm -rf "$out"
    mkdir -p "$out"
    [ -n "$keep" ] && mv "$keep" "$out/console.log.1.keep"
    stage=$(mktemp -d)
    io=$stage/io.img
    mkdir -p "$stage/disk/in" "$stage/disk/out"
    cp -a "$in/." "$stage/disk/in/"
    chmod -R a+rX "$stage/disk/in"
    echo "$limit" > "$stage/disk/in/limit_s"
    mke2fs -q -t ext4 -L io -d "$stage/disk" "$io" 2G > /dev/null
    log "booting (TCG, 2 vCPU, 3 GiB; at most $limit s)"
    t0=$SECONDS
    timeout "$((limit + 120))" qemu-system-x86_64 -accel tcg -cpu max -smp 2 -m 3072 \
        -nographic -no-reboot -nic none \
        -kernel "$dir/vmlinuz" -initrd "$dir/initrd.img" \
        -append "root=/dev/vda rw console=ttyS0 loglevel=4 systemd.unified_cgroup_hierarchy=1 panic=1 oops=panic" \
        -drive "file=$dir/root.img,if=virtio,format=raw,snapshot=on" \
        -drive "file=$io,if=virtio,format=raw" \
        < /dev/null 2>&1 | follow_console "$t0" || rc=$?
    log "powered off after $((SECONDS - t0)) s"
    debugfs -R "rdump /out $stage" "$io" > /dev/null 2>&1 || true
    cp -a "$stage/out/." "$out/"
    rm -rf "$stage"
    if grep -q "Kernel panic" "$out/console.log" 2>/dev/null; then
        return 3
    fi
    return $rc
}

# The input of the node role's scenario, in a new directory; prints its path.
test_input() {
    local t
    t=$(mktemp -d)
    cp "$here/vm/guest.sh" "$here/workload.py" "$t/"
    cp "$here/../../infra/slurm/task-epilog.sh" "$t/task-epilog.sh"
    [ -x "$shipper" ] || die "no shipper at $shipper: cargo build -p slurm-cw-shipper"
    cp "$shipper" "$t/slurm-cw-shipper"
    echo "$version" > "$t/version"
    [ -n "${SLURM_VM_SCENARIOS:-}" ] && echo "$SLURM_VM_SCENARIOS" > "$t/scenarios"
    chmod -R a+rX "$t"
    echo "$t"
}

command=${1:-}
[ $# -gt 0 ] && shift
version="" in="" out="" limit=900 shipper=$here/../../target/debug/slurm-cw-shipper
while [ $# -gt 0 ]; do
    case "$1" in
        --version) version=${2:-}; shift 2 ;;
        --in) in=${2:-}; shift 2 ;;
        --out) out=${2:-}; shift 2 ;;
        --limit) limit=${2:-}; shift 2 ;;
        --shipper) shipper=${2:-}; shift 2 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
case "$version" in
    24.11) suite=trixie ;;
    26.05) suite=sid ;;
    *) echo "--version 24.11 (Debian trixie) or 26.05 (Debian sid)" >&2; exit 2 ;;
esac
[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot)"
dir=${SLURM_VM_CACHE:-/var/cache/slurm-cw-bench}/vm-$version
case "$command" in
    build) build ;;
    run) run ;;
    test)
        in=$(test_input)
        trap 'rm -rf "$in"' EXIT
        run
        ;;
    *) echo "usage: $0 build|run --version 24.11|26.05 [--in DIR --out DIR [--limit S]]" >&2; exit 2 ;;
esac

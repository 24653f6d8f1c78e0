#!/bin/sh
# Baked into the VM bench's image (scripts/bench/vm.sh) as /usr/local/sbin/bench-boot, run by
# bench.service: mounts the input/output disk, gives slurmctld an address to resolve, runs
# in/guest.sh with a time limit and keeps its output and exit status on that disk.
set -u
say() { echo "vm-bench: $*" > /dev/ttyS0; }
say "booted in $(cut -d' ' -f1 /proc/uptime) s"
mkdir -p /io
if ! mount -t ext4 /dev/vdb /io; then
    say "cannot mount the input/output disk"; exit 1
fi
mkdir -p /io/out
chmod 1777 /io/out
# A loopback-only guest leaves slurmctld no address of its own (getaddrinfo fails): a dummy
# link with a link-local address, which /etc/hosts gives the host name.
ip link add bench0 type dummy && ip addr add 169.254.77.1/32 dev bench0 && ip link set bench0 up
limit=$(cat /io/in/limit_s 2>/dev/null || echo 900)
timeout "$limit" sh /io/in/guest.sh /io/in /io/out > /io/out/guest.log 2>&1
rc=$?
echo "$rc" > /io/out/rc
journalctl -b --no-pager > /io/out/journal.txt 2>&1 || true
sync
umount /io || sync
say "guest.sh ended with status $rc"

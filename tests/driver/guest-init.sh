#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
#
# /init of the QEMU suite's initramfs (busybox). Loads the DRM modules and
# neuron.ko, runs the tests and powers off. Result lines: "PASS: name",
# "FAIL: name", reasons on "# " lines. The kernel log is dumped at the end
# for the host to look for splats.
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mkdir -p /sys/fs/cgroup
mount -t cgroup2 cgroup2 /sys/fs/cgroup && echo +memory >/sys/fs/cgroup/cgroup.subtree_control
echo 5 >/proc/sys/kernel/printk		# warnings reach the console too
# NEURON_SUITE_TESTS (run-qemu-suite.sh): only these neuron_test prefixes.
[ -f /suite.env ] && . /suite.env

pass() { echo "PASS: $1"; }
fail() { echo "FAIL: $1"; [ -n "$2" ] && echo "# $2"; }

for m in $(cat /modules.order); do
	insmod /lib/modules/$m || echo "# insmod $m failed"
done

TIMEOUT_MS=500
KO=/lib/modules/neuron.ko
loaded() { grep -q '^neuron ' /proc/modules; }
# What packaging/udev/70-neuron-accel.rules does on a real system: root's
# alone (neurond opens the nodes; tenants go through its socket).
udev_like() {
	for n in /dev/accel/accel*; do chown 0:0 "$n"; chmod 0600 "$n"; done
}
sysfs() { cat /sys/class/accel/accel0/device/$1; }
expect() {	# name, actual, wanted
	if [ "$2" = "$3" ]; then pass "$1"; else fail "$1" "got '$2', want '$3'"; fi
}

echo "=== NEURON SUITE BEGIN"

# NEURON_SUITE_TESTS=fuzz: the fuzzer alone (section 5); other prefixes:
# those neuron_test tests alone (section 1).
ONLY=${NEURON_SUITE_TESTS:-}
main_sections() {
# 1. Everything else, on two trn2 devices with 256 MiB HBM each.
if insmod $KO devices=2 hbm_mib=256 job_timeout_ms=$TIMEOUT_MS; then
	pass module_load
	udev_like
	neuron_test -t $TIMEOUT_MS $ONLY
	rmmod neuron && pass module_unload || fail module_unload
else
	fail module_load
fi
[ -n "$ONLY" ] && return	# a developer's subset: stop here

# 2. Module parameters and profiles.
params() {	# name, insmod args, "cores hbm_total profile dma_queues"
	n=$1; shift; want=$1; shift
	if insmod $KO "$@"; then
		got="$(sysfs cores) $(sysfs hbm_total_bytes) $(sysfs profile) $(sysfs dma_queues)"
		expect "$n" "$got" "$want"
		rmmod neuron
	else
		fail "$n" "insmod $*"
	fi
}
params params_trn1 "2 34359738368 trn1 2" profile=trn1
params params_trn3 "8 154618822656 trn3 2" profile=trn3
params params_default "8 103079215104 trn2 2"
params params_custom "4 67108864 trn2 3" cores=4 hbm_mib=64 dma_queues=3
bad=""
for args in profile=trn9 cores=65 devices=0 devices=9 dma_queues=0 \
	    job_timeout_ms=1 hbm_mib=99999999; do
	if insmod $KO $args 2>/dev/null; then bad="$bad $args"; rmmod neuron; fi
done
expect params_rejected "${bad:-none}" none
# 1 TiB of HBM would not fit DRM's mmap offset space: refused by name, not
# by a failed probe; the largest accepted size loads.
dmesg -c >/dev/null
if insmod $KO hbm_mib=1048576 2>/dev/null; then
	fail params_hbm_max_named "hbm_mib=1048576 loaded"
	rmmod neuron
elif dmesg | grep -q 'module parameter hbm_mib out of range'; then
	pass params_hbm_max_named
else
	fail params_hbm_max_named "hbm_mib=1048576 refused without naming hbm_mib: $(dmesg | tail -3)"
fi
params params_hbm_max "8 549755813888 trn2 2" hbm_mib=524288
insmod $KO devices=3 && {
	expect params_three_devices "$(ls /dev/accel | wc -l)" 3
	rmmod neuron
}

# 3. Unload is refused while a file, mapping or dma-buf is alive; unload
# with a long DMA job running stops it first; DMA jobs time out like compute.
insmod $KO && udev_like && neuron_test x_unload_refused_while_in_use
loaded && rmmod neuron
insmod $KO job_timeout_ms=60000 && neuron_test x_rmmod_during_long_dma
loaded && rmmod neuron
insmod $KO job_timeout_ms=10 && neuron_test -t 10 x_dma_timeout
loaded && rmmod neuron

# 4. 50 load/unload cycles with work in between: no leak.
memkb() { awk -v k="$1:" '$1 == k { print $2 }' /proc/meminfo; }
settle() { echo 3 >/proc/sys/vm/drop_caches; sleep 1; }
cycle() {
	insmod $KO devices=2 hbm_mib=64 job_timeout_ms=$TIMEOUT_MS || return 1
	neuron_test x_cycle_work >/tmp/cycle.log || { cat /tmp/cycle.log; rmmod neuron; return 1; }
	rmmod neuron
}
ok=1
for i in 1 2 3; do cycle || ok=0; done
# What a leak of the driver's would grow: slab, percpu and vmalloc memory
# (to 1 MiB), or pages (HBM, shmem): MemAvailable, which also moves with the
# kernel's own caches and per-CPU page lists (seen: -19 MiB and +7 MiB over
# leak-free runs), so only to 32 MiB: a cycle backs 1 MiB of HBM and 2 MiB of
# shmem, and any one of those BOs leaked per cycle is 50 MiB or more.
kmem() { echo $(( $(memkb SUnreclaim) + $(memkb Percpu) + $(memkb VmallocUsed) )); }
settle
free0=$(memkb MemAvailable); kmem0=$(kmem)
for i in $(seq 50); do cycle || { ok=0; echo "# cycle $i failed"; break; }; done
settle
free1=$(memkb MemAvailable); kmem1=$(kmem)
echo "# 50 cycles: MemAvailable $free0 -> $free1 kB, slab+percpu+vmalloc $kmem0 -> $kmem1 kB"
if [ $ok = 1 ] && [ $((free0 - free1)) -lt 32768 ] && [ $((kmem1 - kmem0)) -lt 1024 ] && ! loaded; then
	pass load_unload_50_cycles_no_leak
else
	fail load_unload_50_cycles_no_leak
fi

}
[ "$ONLY" = fuzz ] || main_sections
[ -n "$ONLY" ] && [ "$ONLY" != fuzz ] && NEURON_FUZZ_SECONDS=none

# 5. The ioctl fuzzer (tests/driver/fuzz_main.c), bounded in time, in a
# memory cgroup of its own. It fails on a crash, a new taint bit, a call that
# must fail and did not, or wrong data; the host fails the boot on a splat.
if [ "$NEURON_FUZZ_SECONDS" = none ]; then
	:
elif insmod $KO devices=2 hbm_mib=128 job_timeout_ms=1000; then
	udev_like
	mkdir -p /sys/fs/cgroup/nt-fuzz
	echo $((384 << 20)) >/sys/fs/cgroup/nt-fuzz/memory.max
	t0=$(date +%s)
	sh -c "echo \$\$ >/sys/fs/cgroup/nt-fuzz/cgroup.procs &&
	       exec neuron_fuzz -s ${NEURON_FUZZ_SECONDS:-45} ${NEURON_FUZZ_SEED:+-S $NEURON_FUZZ_SEED}" &
	fuzz=$!
	# A fuzzer still running 2 minutes after its time: every task's kernel
	# stack to the console (SysRq t), then its group is killed and it fails.
	( sleep $(( ${NEURON_FUZZ_SECONDS:-45} + 120 )) && kill -0 $fuzz 2>/dev/null &&
	  echo "# fuzz: still running, tasks:" && echo 1 >/proc/sys/kernel/sysrq &&
	  echo t >/proc/sysrq-trigger && echo 1 >/sys/fs/cgroup/nt-fuzz/cgroup.kill ) &
	watchdog=$!
	wait $fuzz
	rc=$?
	kill $watchdog 2>/dev/null
	echo "# fuzz: $(( $(date +%s) - t0 )) s"
	if [ $rc = 0 ]; then
		pass fuzz_ioctls
	else
		fail fuzz_ioctls "neuron_fuzz exited with $rc; replay with its seed (NEURON_FUZZ_SEED)"
	fi
	for i in 1 2 3 4 5; do rmmod neuron 2>/dev/null && break; sleep 1; done
	loaded && fail fuzz_module_unload || pass fuzz_module_unload
else
	fail fuzz_module_load
fi

echo "=== NEURON SUITE END"
echo "=== DMESG BEGIN"
dmesg
echo "=== DMESG END"
poweroff -f

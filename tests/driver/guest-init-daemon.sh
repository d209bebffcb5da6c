#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
#
# /init of the daemon boot of the QEMU suite (tests/driver/daemon-suite.sh):
# loads the DRM modules and neuron.ko, runs each tests/daemon and tests/sharing
# Criterion suite with NEURON_DAEMON = neurond --backend kmd (the suites reload
# the module to the device settings each test gives neurond:
# tests/common/kmd_module.h), prints a PASS/FAIL line per test (from Criterion's
# TAP report), and powers off.
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
# /tmp stays on the initramfs root (writable): a tmpfs there would hide a
# build tree under /tmp that the binaries were packed from.
mkdir -p /tmp && chmod 1777 /tmp
mkdir -p /dev/shm && mount -t tmpfs tmpfs /dev/shm
echo 5 >/proc/sys/kernel/printk
# See guest-init-kmd.sh: qemu64 + OpenBLAS's runtime dispatch = 3DNow! in TCG.
export OPENBLAS_CORETYPE=Prescott
. /daemon-suite.env

for m in $(cat /modules.order); do
	insmod /lib/modules/$m || echo "# insmod $m failed"
done

echo "=== NEURON DAEMON SUITE BEGIN"
# Job timeout 20 s: TCG runs the op kernels many times slower than a host, and
# the pump's job budget is sized for the default 2 s on real cores.
if insmod /lib/modules/neuron.ko devices=2 cores=2 hbm_mib=256 job_timeout_ms=20000; then
	export NEURON_DAEMON=/bin/neurond-kmd
	export NEURON_TEST_KMD_MODULE=/lib/modules/neuron.ko
	export NEURON_TEST_KMD_MODULE_ARGS="job_timeout_ms=20000"
	# Tiles sized for TCG (where a host's 0.3 ms tile takes tens of ms): a quarter
	# of neurond's default budgets, unless a test sets its own.
	export NEURON_TEST_DAEMON_ARGS="--tile-macs 4194304 --tile-elements 131072"
	# "Not hung" bounds of the suites' waits, likewise (tests/common/test_time.h).
	export NEURON_TEST_WAIT_SCALE=4
	# kill9's reclaim bound (100 ms at host speed) scaled for TCG: a command
	# running when the tenant dies runs many times slower here.
	export NEURON_TEST_RECLAIM_BOUND_MS=1000
	echo "# daemon-kmd: kill9 reclaim bound scaled to ${NEURON_TEST_RECLAIM_BOUND_MS} ms for TCG"
	# Fail fast if neurond cannot use the driver at all.
	if /bin/neurond-kmd --socket /tmp/probe.sock --log-level info >/tmp/probe.log 2>&1 &
	then
		pid=$!
		sleep 2
		if grep -q 'backend=kmd' /tmp/probe.log; then
			echo "PASS: daemon_kmd_backend_selected"
		else
			echo "FAIL: daemon_kmd_backend_selected"
			sed 's/^/# neurond: /' /tmp/probe.log | head -20
		fi
		kill $pid 2>/dev/null
		wait $pid 2>/dev/null
	fi
	for suite in $SUITES; do
		dir=${suite%%/*}
		s=$dir-${suite#*/}
		t0=$(date +%s)
		"$BUILD/tests/$dir/test-$s" --jobs=1 --tap=/tmp/$s.tap >/tmp/$s.out 2>&1
		rc=$?
		# Criterion's TAP: "ok - suite::test  (0.01s)" / "not ok - suite::test ...".
		# A skip here means neurond was not on the kmd backend: a failure, unless
		# the test says it is of what kmd does not run ("not on --backend kmd").
		sed -n -e "s/^ok \([0-9]* \)*- \([^ ]*\).*# SKIP *not on --backend kmd\(.*\)/SKIP: daemon-kmd \2 (not on kmd\3)/p" \
		       -e "/# SKIP *not on --backend kmd/d" \
		       -e "s/^ok \([0-9]* \)*- \([^ ]*\).*# SKIP\(.*\)/FAIL: daemon-kmd \2 skipped:\3/p" \
		       -e "/# SKIP/d" \
		       -e "s/^ok \([0-9]* \)*- \([^ ]*\).*/PASS: daemon-kmd \2/p" \
		       -e "s/^not ok \([0-9]* \)*- \([^ ]*\).*/FAIL: daemon-kmd \2/p" /tmp/$s.tap
		# One line per test is counted; the suite adds a FAIL only when it failed
		# without a failing test to show for it (a crash, a timeout).
		echo "# daemon-kmd $s: exit $rc after $(( $(date +%s) - t0 ))s"
		# Measured figures a test prints ("figure: ..."), pass or fail.
		grep -a '^figure: ' /tmp/$s.out | sed 's/^/# daemon-'$s': /'
		if [ "$rc" != 0 ]; then
			grep -q '^not ok' /tmp/$s.tap || echo "FAIL: daemon-kmd $s suite exited $rc"
			grep -v '^[[:space:]]*$' /tmp/$s.out | grep -v '^\[----\]   [0-9T:.-]*Z ' | tail -40 | sed 's/^/# daemon-'$s': /'
		fi
	done
	if [ "$BENCH" = 1 ]; then
		# The same benchmark on both backends in this guest (issue 10 item 6),
		# alternating so that both see the same host.
		for r in $(seq "${BENCH_RUNS:-1}"); do
			for b in emu kmd; do
				"$BUILD/tests/sharing/bench-sharing" --neurond "$BUILD/daemon/neurond" --backend $b $BENCH_ARGS 2>&1 |
					sed "s/^/# bench $b run $r: /"
			done
		done
	fi
	# Every daemon the suites started has exited (a benchmark that failed may leave
	# one behind for a moment).
	for i in 1 2 3 4 5 6 7 8 9 10; do pidof neurond >/dev/null 2>&1 || break; sleep 1; done
	if rmmod neuron; then
		echo "PASS: daemon_module_unload_after_suites"
	else
		echo "FAIL: daemon_module_unload_after_suites"
	fi
else
	echo "FAIL: daemon_module_load"
fi
echo "=== NEURON DAEMON SUITE END"
echo "=== DMESG BEGIN"
dmesg
echo "=== DMESG END"
poweroff -f

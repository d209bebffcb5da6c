# SPDX-License-Identifier: GPL-2.0-only
#
# Sourced by run-qemu-suite.sh, kmd-suite.sh and daemon-suite.sh: one QEMU
# (TCG) boot of a test initramfs, retried once when the kernel crashed before
# /init printed the suite's BEGIN marker; and, for the boots after the first
# (the suite scripts), their common arguments, messages and verdict lines.
#
# Why the retry: both /init scripts print BEGIN before they load neuron.ko,
# so a crash before it happened in the stock kernel's own boot (initramfs
# unpacking, built-in drivers), never in code of ours. CI saw one such panic
# (a page fault in an IPI, 8 ms after "Freeing initrd memory") that ~30 local
# boots did not reproduce. The crash is still printed in full, so it stays
# visible; a crash after BEGIN is never retried and fails the suite.
#
#   qemu_boot VMLINUZ INITRAMFS LOG BEGIN_MARKER TIMEOUT
#
# Writes LOG (raw console) and LOG.txt (without CRs); sets QEMU_RC to
# QEMU's exit status (124/137 on timeout). QEMU_APPEND_EXTRA adds kernel
# command line options (the debug knobs of the first boot).

QEMU_SPLAT='(Oops|BUG:|WARNING:|KASAN|UBSAN|KFENCE:|general protection fault|Kernel panic|possible circular locking|possible recursive locking|inconsistent lock state|suspicious RCU usage|list_(add|del) corruption|blocked for more than|soft lockup|Poison overwritten|Redzone overwritten|Object padding overwritten)'

qemu_boot() {
	local vmlinuz=$1 initramfs=$2 log=$3 marker=$4 limit=$5 attempt
	for attempt in 1 2; do
		timeout --foreground -k 5 "$limit" qemu-system-x86_64 -accel tcg -m 1G -smp 2 \
			-nographic -no-reboot -kernel "$vmlinuz" -initrd "$initramfs" \
			-append "console=ttyS0 panic=-1 oops=panic quiet loglevel=4 ${QEMU_APPEND_EXTRA:-}" \
			</dev/null >"$log" 2>&1
		QEMU_RC=$?
		tr -d '\r' <"$log" >"$log.txt"
		# Not anchored: the firmware's escape codes may precede the marker.
		if grep -qF "$marker" "$log.txt" || ! grep -Eq "$QEMU_SPLAT" "$log.txt"; then
			return 0
		fi
		echo "[driver-suite] the kernel crashed while booting, before $marker" \
			"(neuron.ko was not loaded yet); attempt $attempt of 2. Its log:"
		grep -E -B5 -A40 "$QEMU_SPLAT" "$log.txt" | head -80
		cp "$log.txt" "$log.boot-crash-$attempt.txt"
	done
	return 0
}

# The verdict lines every boot but the first adds to RESULTS after qemu_boot:
#   qemu_boot_verdict PREFIX LOG END_MARKER INIT_NAME WHAT RESULTS
# FAIL lines PREFIX_qemu_timeout, PREFIX_suite_finished (END_MARKER missing) and
# PREFIX_kernel_log_clean (a splat; printed), else PASS PREFIX_kernel_log_clean.
qemu_boot_verdict() {
	local prefix=$1 log=$2 end=$3 init=$4 what=$5 results=$6
	_verdict_fail() { echo "FAIL: $1" >>"$results"; echo "# $2" >>"$results"; echo "FAIL: $1 ($2)"; }
	if [ "$QEMU_RC" = 124 ] || [ "$QEMU_RC" = 137 ]; then
		tail -40 "$log.txt"
		_verdict_fail "${prefix}_qemu_timeout" "QEMU did not finish in time"
	fi
	grep -q "^$end" "$log.txt" || _verdict_fail "${prefix}_suite_finished" "the guest did not reach the end of $init"
	if grep -Eq "$QEMU_SPLAT" "$log.txt"; then
		grep -E -B2 -A20 "$QEMU_SPLAT" "$log.txt" | head -60
		_verdict_fail "${prefix}_kernel_log_clean" "kernel splat during $what"
	else
		echo "PASS: ${prefix}_kernel_log_clean" | tee -a "$results"
	fi
}

# --- the suite scripts of the later boots (kmd-suite.sh, daemon-suite.sh) ------
# run-qemu-suite.sh calls each with the same arguments,
#   SUITE.sh ROOT WORK KVER VMLINUZ KO BASE_INITRAMFS_DIR RESULTS TIMEOUT
# and each starts with `suite_args NAME "$@"`, which sets ROOT WORK KVER VMLINUZ
# KO BASE_IRD RESULTS QEMU_TIMEOUT, HERE (tests/driver) and SUITE_WORK
# (WORK/NAME, created), and defines the suite's say and result_fail. These are
# defined here, not at the top level, because run-qemu-suite.sh sources this
# file too and has its own say.
suite_args() {
	SUITE_NAME=$1
	ROOT=$2 WORK=$3 KVER=$4 VMLINUZ=$5 KO=$6 BASE_IRD=$7 RESULTS=$8 QEMU_TIMEOUT=$9
	HERE=$ROOT/tests/driver
	SUITE_WORK=$WORK/$SUITE_NAME
	mkdir -p "$SUITE_WORK"
	say() { echo "[driver-suite] $SUITE_NAME: $*"; }
	# result_fail NAME [WHY]: a FAIL line (and a "# WHY" line) in RESULTS, also printed.
	result_fail() { echo "FAIL: $1" >>"$RESULTS"; [ -n "${2:-}" ] && echo "# $2" >>"$RESULTS"; echo "FAIL: $1${2:+ ($2)}"; }
}

# Boots SUITE_WORK/initramfs.gz (qemu_boot), says how it went, and appends the
# guest's PASS/FAIL/# lines to RESULTS. Sets LOG (SUITE_WORK/console.log) and,
# through qemu_boot, QEMU_RC: what qemu_boot_verdict reads next.
#   suite_boot BEGIN_MARKER
suite_boot() {
	local t0
	LOG=$SUITE_WORK/console.log
	say "booting $KVER in QEMU (TCG, timeout ${QEMU_TIMEOUT}s); console log: $LOG"
	t0=$(date +%s)
	qemu_boot "$VMLINUZ" "$SUITE_WORK/initramfs.gz" "$LOG" "$1" "$QEMU_TIMEOUT"
	say "QEMU exited with $QEMU_RC after $(( $(date +%s) - t0 ))s"
	grep -E '^(PASS|FAIL|# )' "$LOG.txt" >>"$RESULTS"
}

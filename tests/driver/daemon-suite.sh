#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Third QEMU boot of the driver suite: neurond on the kmd backend (issue 3
# item 7). The libneuron tenant suites of tests/daemon (Criterion) run in the
# guest against a neurond started with --backend kmd, so every allocation,
# copy and command goes through neuron.ko. Called by run-qemu-suite.sh with
#
#   daemon-suite.sh ROOT WORK KVER VMLINUZ KO BASE_INITRAMFS_DIR RESULTS TIMEOUT
#
# 1. Builds neurond and the test-daemon-* binaries in a Meson build dir
#    (NEURON_BUILD_DIR, default ROOT/build; set up if missing; -j2).
# 2. Packs an initramfs: the main boot's (busybox, DRM modules, neuron.ko),
#    tests/driver/guest-init-daemon.sh as /init, the binaries and every shared
#    library ldd lists (at their host paths, so RPATHs keep working) plus the
#    dynamic loader.
# 3. Boots it; the guest prints one PASS/FAIL line per Criterion test
#    (from its TAP output); they are appended to RESULTS,
#    plus a FAIL line for a missing end marker, a timeout or a kernel splat.
# NEURON_SUITE_SKIP_DAEMON=1 (in run-qemu-suite.sh) skips this boot.
set -uo pipefail

# shellcheck source=qemu-boot.sh
. "$(dirname "${BASH_SOURCE[0]}")/qemu-boot.sh"
suite_args daemon "$@"
# The daemon and sharing suites take minutes under TCG: a limit of their own.
QEMU_TIMEOUT=${NEURON_DAEMON_SUITE_TIMEOUT:-1200}
# meson and ninja from the stack's virtual environment (tools/setup/python-env.sh).
. "$ROOT/tools/setup/use-venv.sh" || { result_fail daemon_build "the Python environment (.venv) could not be set up"; exit 0; }

# The suites that run in the guest: tests/daemon's and tests/sharing's Criterion
# suites (their meson.build names, as dir/test-<dir>-<name> binaries).
SUITES=${NEURON_DAEMON_SUITES-"daemon/e2e-ops daemon/isolation daemon/malformed-control daemon/malformed-ring
	daemon/lifecycle daemon/kill9 daemon/restart daemon/kmd-backend daemon/collective daemon/programs daemon/tile-kernels daemon/restart-kept sharing/lend-reclaim sharing/preemption sharing/tenant-exit
	sharing/auto-policy sharing/admin sharing/weight sharing/tiling sharing/physical-cores sharing/kernel-preemption"}
suite_bin() { echo "tests/${1%%/*}/test-${1%%/*}-${1#*/}"; }

# --- 1. binaries -------------------------------------------------------------------
BUILD=${NEURON_BUILD_DIR:-$ROOT/build}
if [ ! -f "$BUILD/build.ninja" ]; then
	say "setting up $BUILD"
	meson setup "$BUILD" >"$SUITE_WORK/meson-setup.log" 2>&1 ||
		{ tail -20 "$SUITE_WORK/meson-setup.log"; result_fail daemon_build "meson setup $BUILD failed"; exit 0; }
fi
targets=(daemon/neurond)
for s in $SUITES; do targets+=("$(suite_bin "$s")"); done
# NEURON_SUITE_BENCH=1: bench-sharing on both backends in the guest after the suites
# (NEURON_DAEMON_SUITES="" for the benchmark alone); NEURON_SUITE_BENCH_RUNS=N runs it
# N times per backend, alternating (default 1); NEURON_SUITE_BENCH_ARGS adds arguments
# (e.g. --quick).
BENCH=${NEURON_SUITE_BENCH:-0}
BENCH_RUNS=${NEURON_SUITE_BENCH_RUNS:-1}
BENCH_ARGS=${NEURON_SUITE_BENCH_ARGS:-}
[ "$BENCH" = 1 ] && targets+=(tests/sharing/bench-sharing)
say "building ${targets[*]} in $BUILD (-j2)"
t0=$(date +%s)
if ! ninja -C "$BUILD" -j2 "${targets[@]}" >"$SUITE_WORK/build.log" 2>&1; then
	tail -30 "$SUITE_WORK/build.log"
	result_fail daemon_build "neurond or the daemon suites did not build; see $SUITE_WORK/build.log"
	exit 0
fi
say "build step took $(( $(date +%s) - t0 ))s"

# --- 2. initramfs ------------------------------------------------------------------
IRD=$SUITE_WORK/initramfs
rm -rf "$IRD"
cp -a "$BASE_IRD" "$IRD"
# A file at its host path inside the initramfs (libraries follow RPATH/ldconfig paths).
put() {
	local f
	f=$(readlink -f "$1")
	mkdir -p "$IRD$(dirname "$1")"
	cp -L "$f" "$IRD$1"
}
bins=("$BUILD/daemon/neurond")
for s in $SUITES; do bins+=("$BUILD/$(suite_bin "$s")"); done
[ "$BENCH" = 1 ] && bins+=("$BUILD/tests/sharing/bench-sharing")
libs=$(for b in "${bins[@]}"; do ldd "$b"; done | awk '/=> \//{print $3} /^\t\/lib/{print $1}' | sort -u)
for f in "${bins[@]}" $libs; do put "$f"; done
# The loader the binaries name (PT_INTERP), and ldconfig's search path.
put /lib64/ld-linux-x86-64.so.2
mkdir -p "$IRD/lib64" "$IRD/etc"
echo "/lib/x86_64-linux-gnu" >"$IRD/etc/ld.so.conf"
# The users the suites switch to (the admin suite's unprivileged caller).
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$IRD/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$IRD/etc/group"
# What the guest runs: neurond on the kmd backend (the suites start a daemon
# per test through $NEURON_DAEMON, with --profile/--devices/... that the kmd
# backend reports as not applying; the module is loaded to match them).
cat >"$IRD/bin/neurond-kmd" <<WRAP
#!/bin/sh
exec $BUILD/daemon/neurond --backend kmd "\$@"
WRAP
chmod +x "$IRD/bin/neurond-kmd"
{
	echo "BUILD=$BUILD"
	echo "SUITES=\"$(echo $SUITES)\""
	echo "BENCH=$BENCH"
	echo "BENCH_RUNS=$BENCH_RUNS"
	echo "BENCH_ARGS=\"$BENCH_ARGS\""
} >"$IRD/daemon-suite.env"
cp "$HERE/guest-init-daemon.sh" "$IRD/init"
chmod +x "$IRD/init"
for a in chmod rmmod insmod mktemp rm date env id kill ps pidof sleep; do ln -sf busybox "$IRD/bin/$a"; done
(cd "$IRD" && find . | cpio -o -H newc --quiet | gzip -1) >"$SUITE_WORK/initramfs.gz"
say "initramfs $(du -h "$SUITE_WORK/initramfs.gz" | cut -f1)"

# --- 3. boot -----------------------------------------------------------------------
suite_boot "=== NEURON DAEMON SUITE BEGIN"
say "$(grep -c '^PASS: daemon-kmd' "$LOG.txt") tests passed, $(grep -c '^FAIL: daemon-kmd' "$LOG.txt") failed"
grep -E '^FAIL' "$LOG.txt" || true
grep -E '^# daemon' "$LOG.txt" | head -80 || true
grep -E '^# bench' "$LOG.txt" || true
qemu_boot_verdict daemon "$LOG" "=== NEURON DAEMON SUITE END" guest-init-daemon.sh "the daemon suites" "$RESULTS"
exit 0

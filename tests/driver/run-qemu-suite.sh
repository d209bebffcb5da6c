#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# QEMU suite of the neuron kernel driver (driver/).
#
#   bash tests/driver/run-qemu-suite.sh
#
# 1. Installs what it needs (idempotent; says what it does): bookworm-backports
#    in /etc/apt/sources.list.d, Debian's newest linux-image/linux-headers 6.12
#    (and, to check both drm_sched API forms, the newest 6.12 headers of
#    bookworm-backports), qemu-system-x86, busybox-static, gcc, make, cpio,
#    linux-source-6.12 (for checkpatch.pl).
# 2. Host checks (tests/driver/host-checks.sh): W=1 build without warnings,
#    checkpatch --strict, uAPI struct layout, build against other headers.
# 3. Builds neuron.ko (NEURON_DEBUG=1: lock and context assertions) and the
#    static test programs (neuron_test, neuron_fuzz), packs an initramfs with
#    busybox, the DRM modules neuron.ko needs and the tests, boots the kernel
#    once in QEMU (TCG, with SLUB red zones and poisoning, KFENCE, page
#    poisoning and the hung task detector on) and runs every test there,
#    then the ioctl fuzzer (NEURON_FUZZ_SECONDS, default 45; NEURON_FUZZ_SEED).
# 4. Boots a second time for the kmd backend library (tests/driver/kmd-suite.sh:
#    runtime/kmd + tests/kmd/kmd_test.cpp against the driver; skip with
#    NEURON_SUITE_SKIP_KMD=1).
# 5. Boots a third time for neurond's kmd backend (tests/driver/daemon-suite.sh:
#    the tests/daemon Criterion suites against neurond --backend kmd; needs
#    neurond and the suites built in NEURON_BUILD_DIR, default build/; skip
#    with NEURON_SUITE_SKIP_DAEMON=1).
# 6. Prints "N passed, N failed" (all boots); exits non-zero on any failure or
#    on a kernel oops/WARNING/BUG/KASAN/lockdep splat in a console log.
#
# Environment: NEURON_SUITE_DIR (work directory, default
# /var/tmp/neuron-driver-suite), NEURON_SUITE_TIMEOUT (QEMU wall-clock limit
# in seconds, default 420), NEURON_SUITE_SKIP_HOST_CHECKS=1, NEURON_KERNEL
# (a linux-image-*-amd64 release to boot instead of the newest 6.12),
# NEURON_SUITE_TESTS (first boot: only these neuron_test name prefixes, no
# parameter, unload, cycle or fuzz sections: for a quick loop).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE=$ROOT/tests/driver
# shellcheck source=qemu-boot.sh
. "$HERE/qemu-boot.sh"
WORK=${NEURON_SUITE_DIR:-/var/tmp/neuron-driver-suite}
QEMU_TIMEOUT=${NEURON_SUITE_TIMEOUT:-420}
START=$(date +%s)
mkdir -p "$WORK"

say() { echo "[driver-suite] $*"; }
die() { echo "[driver-suite] error: $*" >&2; echo "0 passed, 1 failed"; exit 1; }

export DEBIAN_FRONTEND=noninteractive
APT_UPDATED=0
apt_update() {
	if [ "$APT_UPDATED" = 0 ]; then
		say "apt-get update"
		apt-get update -qq || die "apt-get update failed"
		APT_UPDATED=1
	fi
}

# --- 1. packages -------------------------------------------------------------
ensure_backports() {
	# shellcheck source=../../tools/setup/backports.sh
	. "$ROOT/tools/setup/backports.sh"
	ensure_bookworm_backports && return
	APT_UPDATED=0
	apt_update
}

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

apt_install() {
	local missing=() p
	for p in "$@"; do installed "$p" || missing+=("$p"); done
	[ ${#missing[@]} -eq 0 ] && return
	apt_update
	say "installing: ${missing[*]}"
	# INITRD=No: the kernel's postinst hooks skip update-initramfs (the
	# suite boots its own busybox initramfs, and no container needs one).
	if ! INITRD=No apt-get install -y -q --no-install-recommends "${missing[@]}" \
		>"$WORK/apt.log" 2>&1; then
		# Stale package lists (an archive moved on): refresh once, retry.
		APT_UPDATED=0
		apt_update
		INITRD=No apt-get install -y -q --no-install-recommends "${missing[@]}" \
			>"$WORK/apt.log" 2>&1 || { tail -20 "$WORK/apt.log"; die "apt-get install failed"; }
	fi
}

# Newest linux-image-6.12.*-amd64 that apt knows, with matching headers.
pick_kernel() {
	local list
	list=$(apt-cache pkgnames linux-image-6.12. 2>/dev/null |
		grep -E '^linux-image-6\.12\.[0-9]+\+deb12(\.[0-9]+)?-amd64$' |
		sed 's/^linux-image-//' | sort -V || true)
	if [ -z "$list" ]; then
		apt_update
		list=$(apt-cache pkgnames linux-image-6.12. |
			grep -E '^linux-image-6\.12\.[0-9]+\+deb12(\.[0-9]+)?-amd64$' |
			sed 's/^linux-image-//' | sort -V)
	fi
	local k
	for k in $(echo "$list" | tac); do
		if apt-cache show "linux-headers-$k" >/dev/null 2>&1; then
			echo "$k"
			return
		fi
	done
	die "no linux-image-6.12.*-amd64 with headers in apt; check /etc/apt/sources.list.d"
}

# Newest 6.12 headers whose candidate comes from bookworm-backports.
pick_backports_headers() {
	apt-cache pkgnames linux-headers-6.12. |
		grep -E '^linux-headers-6\.12\.[0-9]+\+deb12(\.[0-9]+)?-amd64$' |
		sort -V | tac | while read -r p; do
			if apt-cache policy "$p" | grep -q 'bookworm-backports'; then
				echo "${p#linux-headers-}"
				break
			fi
		done
}

ensure_backports
KVER=${NEURON_KERNEL:-$(pick_kernel)}
BPVER=$(pick_backports_headers || true)
say "kernel for QEMU: $KVER${BPVER:+; extra headers from bookworm-backports: $BPVER}"
pkgs=(linux-image-"$KVER" linux-headers-"$KVER" qemu-system-x86 busybox-static
      cpio xz-utils kmod gcc make libc6-dev perl linux-source-6.12)
[ -n "$BPVER" ] && [ "$BPVER" != "$KVER" ] && pkgs+=(linux-headers-"$BPVER")
apt_install "${pkgs[@]}"

KDIR=/lib/modules/$KVER/build
VMLINUZ=/boot/vmlinuz-$KVER
[ -d "$KDIR" ] || die "$KDIR missing"
[ -f "$VMLINUZ" ] || die "$VMLINUZ missing"

RESULTS=$WORK/results.txt
: >"$RESULTS"

# --- 2. host checks ----------------------------------------------------------
if [ "${NEURON_SUITE_SKIP_HOST_CHECKS:-0}" != 1 ]; then
	say "host checks"
	EXTRA_KDIRS=""
	[ -n "$BPVER" ] && [ "$BPVER" != "$KVER" ] && EXTRA_KDIRS=/lib/modules/$BPVER/build
	NEURON_SUITE_DIR=$WORK bash "$HERE/host-checks.sh" "$KDIR" $EXTRA_KDIRS |
		tee -a "$RESULTS" || true
fi

# --- 3. build ----------------------------------------------------------------
say "building neuron.ko against $KDIR (NEURON_DEBUG=1)"
"$ROOT/driver/build.sh" "$WORK/kbuild-$KVER" "$KDIR" -s NEURON_DEBUG=1 >"$WORK/kbuild.log" 2>&1 ||
	{ cat "$WORK/kbuild.log"; die "module build failed"; }
KO=$WORK/kbuild-$KVER/neuron.ko

LIB_SRCS=("$HERE"/nt_lib.c "$HERE"/nt_engine.c)
TEST_SRCS=("$HERE"/nt_main.c "$HERE"/t_*.c)
FUZZ_SRCS=("$HERE"/fuzz_*.c)
TEST_BIN=$WORK/neuron_test
FUZZ_BIN=$WORK/neuron_fuzz
stamp=$(cat "$HERE"/nt.h "$HERE"/fuzz.h "${LIB_SRCS[@]}" "${TEST_SRCS[@]}" "${FUZZ_SRCS[@]}" \
	"$ROOT"/driver/include/uapi/drm/neuron_accel.h | sha256sum | cut -d' ' -f1)
if [ ! -x "$TEST_BIN" ] || [ ! -x "$FUZZ_BIN" ] ||
   [ "$(cat "$WORK/neuron_test.stamp" 2>/dev/null)" != "$stamp" ]; then
	say "building static test programs"
	# The kernel's uAPI drm.h, minus the __user annotations headers_install
	# would strip (libdrm is not needed).
	common=$(readlink -f "$KDIR/Makefile" | sed 's|-amd64/Makefile$|-common|')
	[ -d "$common/include/uapi/drm" ] || common=$(readlink -f "$KDIR")
	mkdir -p "$WORK/uapi/drm"
	for h in drm.h drm_mode.h; do
		sed 's/__user //g' "$common/include/uapi/drm/$h" >"$WORK/uapi/drm/$h"
	done
	cflags=(-static -O2 -g -Wall -Wextra -Wno-unused-parameter -Wno-override-init -Werror
		-I"$ROOT/driver/include/uapi" -I"$WORK/uapi" -idirafter "$WORK/uapi/drm")
	gcc "${cflags[@]}" -o "$TEST_BIN" "${LIB_SRCS[@]}" "${TEST_SRCS[@]}" ||
		die "test build failed"
	gcc "${cflags[@]}" -o "$FUZZ_BIN" "${LIB_SRCS[@]}" "${FUZZ_SRCS[@]}" ||
		die "fuzzer build failed"
	echo "$stamp" >"$WORK/neuron_test.stamp"
fi

# --- initramfs ---------------------------------------------------------------
say "packing initramfs"
IRD=$WORK/initramfs
rm -rf "$IRD"
mkdir -p "$IRD"/{bin,sbin,proc,sys,dev,tmp,etc,lib/modules}
cp /bin/busybox "$IRD/bin/busybox"
for a in sh mount insmod rmmod poweroff cat grep sleep echo chmod chgrp chown ls \
	 dmesg mkdir awk seq sed head tail wc free date; do
	ln -sf busybox "$IRD/bin/$a"
done
echo 'root:x:0:0::/:/bin/sh' >"$IRD/etc/passwd"
printf 'root:x:0:\nneuron:x:%d:\n' 1000 >"$IRD/etc/group"
# neuron.ko's dependencies in load order, from modules.dep.
deps=$(modinfo -k "$KVER" -F depends "$KO" 2>/dev/null || true)
resolve() {	# module name -> its deps then itself, as paths
	local path
	path=$(awk -F: -v m="$1" '{n=$1; sub(/.*\//,"",n); sub(/\.ko.*/,"",n); gsub(/-/,"_",n); x=m; gsub(/-/,"_",x); if (n==x) {print $0; exit}}' \
		"/lib/modules/$KVER/modules.dep")
	[ -n "$path" ] || die "module $1 not in modules.dep"
	local dep
	for dep in ${path#*:}; do
		echo "$dep"
	done | tac | while read -r d; do echo "$d"; done
	echo "${path%%:*}"
}
order=()
for m in ${deps//,/ }; do
	while read -r p; do
		[ -n "$p" ] || continue
		[[ " ${order[*]} " == *" $p "* ]] || order+=("$p")
	done < <(resolve "$m")
done
: >"$IRD/modules.order"
for p in "${order[@]}"; do
	b=$(basename "$p"); b=${b%.xz}
	case "$p" in
	*.xz) xz -dc "/lib/modules/$KVER/$p" >"$IRD/lib/modules/$b" ;;
	*) cp "/lib/modules/$KVER/$p" "$IRD/lib/modules/$b" ;;
	esac
	echo "$b" >>"$IRD/modules.order"
done
cp "$KO" "$IRD/lib/modules/neuron.ko"
cp "$TEST_BIN" "$IRD/bin/neuron_test"
cp "$FUZZ_BIN" "$IRD/bin/neuron_fuzz"
cp "$HERE/guest-init.sh" "$IRD/init"
{
	echo "NEURON_SUITE_TESTS=\"${NEURON_SUITE_TESTS:-}\""
	echo "NEURON_FUZZ_SECONDS=${NEURON_FUZZ_SECONDS:-45}"
	echo "NEURON_FUZZ_SEED=${NEURON_FUZZ_SEED:-}"
} >"$IRD/suite.env"
chmod +x "$IRD/init"
(cd "$IRD" && find . | cpio -o -H newc --quiet | gzip -1) >"$WORK/initramfs.gz"

# --- boot ----------------------------------------------------------------------
LOG=$WORK/console.log
say "booting $KVER in QEMU (TCG, timeout ${QEMU_TIMEOUT}s); console log: $LOG"
t0=$(date +%s)
set +e
# Debug knobs Debian's kernel has (no lockdep or KASAN there): SLUB red
# zones, poisoning and user tracking; KFENCE sampling; page poisoning; hung
# tasks reported after 30 s. Their splats fail the suite like any other.
QEMU_APPEND_EXTRA="slub_debug=FZPU page_poison=1 kfence.sample_interval=10 hung_task_timeout_secs=30" \
	qemu_boot "$VMLINUZ" "$WORK/initramfs.gz" "$LOG" "=== NEURON SUITE BEGIN" "$QEMU_TIMEOUT"
qrc=$QEMU_RC
set -e
say "QEMU exited with $qrc after $(( $(date +%s) - t0 ))s"
grep -E '^(PASS|FAIL|# )' "$LOG.txt" | tee -a "$RESULTS" >/dev/null || true
grep -E '^(PASS|FAIL)' "$LOG.txt" || true
grep -E '^# ' "$LOG.txt" || true

# --- second boot: the kmd backend library (runtime/kmd, tests/kmd) ----------
# Its PASS/FAIL lines go to $RESULTS, so the closing line counts them too.
if [ "${NEURON_SUITE_SKIP_KMD:-0}" != 1 ]; then
	bash "$HERE/kmd-suite.sh" "$ROOT" "$WORK" "$KVER" "$VMLINUZ" "$KO" "$IRD" "$RESULTS" "$QEMU_TIMEOUT" ||
		echo "FAIL: kmd_suite" >>"$RESULTS"
fi

# --- third boot: neurond on the kmd backend with the daemon suites --------------
if [ "${NEURON_SUITE_SKIP_DAEMON:-0}" != 1 ]; then
	bash "$HERE/daemon-suite.sh" "$ROOT" "$WORK" "$KVER" "$VMLINUZ" "$KO" "$IRD" "$RESULTS" "$QEMU_TIMEOUT" ||
		echo "FAIL: daemon_suite" >>"$RESULTS"
fi

# --- verdict -------------------------------------------------------------------
passed=$(grep -c '^PASS' "$RESULTS" || true)
failed=$(grep -c '^FAIL' "$RESULTS" || true)
if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
	say "QEMU timed out; last console lines:"
	tail -40 "$LOG.txt"
	failed=$((failed + 1))
fi
if ! grep -q '^=== NEURON SUITE END' "$LOG.txt"; then
	say "the guest did not finish the suite"
	failed=$((failed + 1))
fi
if grep -Eq "$QEMU_SPLAT" "$LOG.txt"; then
	say "kernel splat in the console log:"
	grep -E -B2 -A20 "$QEMU_SPLAT" "$LOG.txt" | head -60
	echo "FAIL: kernel log free of oops/WARNING/BUG" >>"$RESULTS"
	failed=$((failed + 1))
else
	passed=$((passed + 1))
fi
say "total time $(( $(date +%s) - START ))s"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]

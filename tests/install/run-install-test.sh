#!/bin/bash
# The install test (issue 13): the stack's Debian packages installed, used, restarted,
# upgraded and purged on a booted Debian 12 host.
#
#   bash tests/install/run-install-test.sh
#
# 1. The host image (host-image.sh: mmdebstrap, Debian's 6.12 kernel from
#    bookworm-backports, systemd as PID 1), cached by the hash of its recipe.
# 2. The packages (packaging/build-packages.sh): this tree as version V1 with the
#    torch_neuron wheel, and again as V2 (a rebuild with a newer changelog entry)
#    for the upgrade; cached by the hash of the tracked sources that go into them;
#    lintian must report no errors.
# 3. A test disk with two local apt repositories (apt-ftparchive), the wheel and
#    guest/guest-test.sh; the image booted in QEMU (TCG, -nic none: everything the
#    guest installs comes from the image or the local repository) on a copy-on-write
#    overlay, so the cached image stays clean.
# 4. The guest prints PASS/FAIL lines; this script prints them and "N passed, N failed".
#
#   bash tests/install/run-install-test.sh --packages-minutes
#                  prints what building this tree's packages would take, in minutes on
#                  a 2-core host: 0 cached, 10 with a warm compiler cache (some earlier
#                  package build is cached), 35 cold (tools/test.sh's time budget)
#   bash tests/install/run-install-test.sh --packages-only
#                  steps 1-2 without the guest (builds and checks the packages; a run
#                  whose time budget has no room for the guest still warms the caches)
#
# Environment: NEURON_CI_CACHE (default /var/cache/neuron-ci), NEURON_INSTALL_TIMEOUT
# (QEMU wall-clock limit, default 3000 s), NEURON_INSTALL_WORK (default
# /var/tmp/neuron-install-test).
set -uo pipefail
SUITE=install-test
. "$(dirname "$0")/lib.sh"
# The packages' cache key: everything that goes into the packages or the wheel, not
# the tests, the CI scripts or the docs (a doc-only change keeps the cached packages,
# README.md in neuron-tools included).
key=$(tree_hash . ':!tests' ':!.ci' ':!tools/test.sh' ':!tools/demo.sh' ':!tools/demo.d' ':!*.md')
pkgs=$CI_CACHE/packages/$key
V1=0.1.0
V2=0.1.0+rebuild1
if [ "${1:-}" = --packages-minutes ]; then
	if cache_ready "$pkgs/$V1" && cache_ready "$pkgs/$V2"; then
		echo 0
	elif ls "$CI_CACHE"/packages/*/"$V1"/complete >/dev/null 2>&1; then
		echo 10
	else
		echo 35
	fi
	exit 0
fi
START=$(date +%s)
WORK=${NEURON_INSTALL_WORK:-/var/tmp/neuron-install-test}
TIMEOUT=${NEURON_INSTALL_TIMEOUT:-3000}
RESULTS=$WORK/results.txt
rm -rf "$WORK"
mkdir -p "$WORK"
: >"$RESULTS"
result() { echo "$1: $2" | tee -a "$RESULTS"; }
finish() {
	local p f
	p=$(grep -c '^PASS' "$RESULTS")
	f=$(grep -c '^FAIL' "$RESULTS")
	say "total time $(($(date +%s) - START))s"
	echo "$p passed, $f failed"
	[ "$f" = 0 ]
	exit
}

need_debs qemu-system-x86 qemu-utils e2fsprogs apt-utils

# --- 1. image ----------------------------------------------------------------------
t0=$(date +%s)
# Its last line of output is the image directory (tools it runs may print before it).
image=$(bash "$INSTALL_TESTS/host-image.sh" | tail -n 1) && [ -f "$image/root.ext4" ] ||
	{ result FAIL "host_image_built"; finish; }
say "host image: $image ($(($(date +%s) - t0))s)"

# --- 2. packages -------------------------------------------------------------------
t0=$(date +%s)
for v in "$V1" "$V2"; do
	dir=$pkgs/$v
	cache_ready "$dir" && continue
	cache_begin "$dir"
	args=(--version "$v")
	[ "$v" = "$V2" ] && args+=(--no-wheel)
	say "building the packages as version $v (cache: $dir)"
	bash "$REPO_ROOT/packaging/build-packages.sh" "$dir" "${args[@]}" || { result FAIL "packages_built_$v"; finish; }
	cache_done "$dir"
done
cache_prune "$CI_CACHE/packages/" 3
say "packages: $pkgs ($(($(date +%s) - t0))s)"
if grep -q '^E: ' "$pkgs/$V1/lintian.txt"; then
	result FAIL "lintian_no_errors ($(grep -c '^E: ' "$pkgs/$V1/lintian.txt") errors, see $pkgs/$V1/lintian.txt)"
else
	result PASS "lintian_no_errors ($(grep -c '^W: ' "$pkgs/$V1/lintian.txt") warnings, explained in packaging/README.md)"
fi
[ "${1:-}" = --packages-only ] && finish

# --- 3. test disk and boot ---------------------------------------------------------
# For each dependency of the .debs in the first directory that neither the image nor
# the packages themselves provide, downloads its first alternative into every directory.
add_missing_dependencies() { # repo-dir...
	local have want alt dep got=""
	have=$(debugfs -R "cat /var/lib/dpkg/status" "$image/root.ext4" 2>/dev/null |
		awk '/^Package:/ {p = $2} /^Provides:/ {sub(/^Provides: */, ""); gsub(/ *\([^)]*\)/, ""); gsub(/, */, "\n"); prov = $0}
		     /^Status: install ok installed/ {print p; if (prov != "") print prov} /^$/ {prov = ""}')
	have+=$'\n'$(for d in "$1"/*.deb; do dpkg-deb -f "$d" Package; done)
	for d in "$1"/*.deb; do
		dpkg-deb -f "$d" Depends | tr ',' '\n' | while read -r alt; do
			[ -n "$alt" ] || continue
			want=""
			for dep in $(echo "$alt" | sed 's/([^)]*)//g; s/|/ /g'); do
				grep -qx "${dep%%:*}" <<<"$have" && { want=""; break; }
				[ -z "$want" ] && want=${dep%%:*}
			done
			[ -n "$want" ] && echo "$want"
		done
	done | sort -u >"$WORK/missing-deps.txt"
	[ -s "$WORK/missing-deps.txt" ] || return 0
	say "dependencies the image lacks, added to the local repository: $(tr '\n' ' ' <"$WORK/missing-deps.txt")"
	mkdir -p "$WORK/deps"
	(cd "$WORK/deps" && xargs apt-get download -q <"$WORK/missing-deps.txt" >"$WORK/deps.log" 2>&1) ||
		{ cat "$WORK/deps.log"; result FAIL "dependencies_downloaded"; finish; }
	for r in "$@"; do cp "$WORK"/deps/*.deb "$r/"; done
}

disk=$WORK/disk
mkdir -p "$disk/repo1" "$disk/repo2" "$disk/wheels"
cp "$pkgs/$V1"/*.deb "$disk/repo1/"
cp "$pkgs/$V2"/*.deb "$disk/repo2/"
cp "$pkgs/$V1"/*.whl "$disk/wheels/"
# Dependencies of the packages that the image lacks go into the local repository too
# (an air-gapped host's mirror has them): downloaded from Debian's archive by apt.
add_missing_dependencies "$disk/repo1" "$disk/repo2"
for r in repo1 repo2; do
	(cd "$disk/$r" && apt-ftparchive packages . >Packages && apt-ftparchive release . >Release)
done
echo "$V2" >"$disk/repo2/VERSION"
cp "$INSTALL_TESTS"/guest/guest-test.sh "$INSTALL_TESTS"/guest/torch_check.py "$INSTALL_TESTS"/guest/torch_restart_check.py "$INSTALL_TESTS"/guest/torch_ddp_check.py "$INSTALL_TESTS"/guest/metrics_check.py "$disk/"
mke2fs -q -t ext4 -L neurontest -d "$disk" "$WORK/test.ext4" 512M
# The kernel splats qemu-boot.sh (tests/driver) knows, for the retry below.
. "$INSTALL_TESTS/../driver/qemu-boot.sh"
LOG=$WORK/console.log
# One retry when the guest kernel crashed before guest-test.sh printed anything:
# then no package of ours was installed yet, the crash is the stock kernel's own
# boot under TCG (CI saw an "Oops: int3" in hrtimer code 1.3 s into boot, as the
# driver suite's boots once did: qemu-boot.sh). It stays printed in full; a crash
# once the test ran is never retried.
for attempt in 1 2; do
	rm -f "$WORK/overlay.qcow2"
	qemu-img create -q -f qcow2 -F raw -b "$image/root.ext4" "$WORK/overlay.qcow2"
	say "booting the host image in QEMU (TCG, -nic none, timeout ${TIMEOUT}s); console: $LOG"
	t0=$(date +%s)
	timeout --foreground -k 10 "$TIMEOUT" qemu-system-x86_64 -accel tcg -cpu max -m 3072 -smp 2 \
		-nographic -no-reboot -nic none \
		-kernel "$image/vmlinuz" -initrd "$image/initrd.img" \
		-append "root=/dev/vda rw console=ttyS0 panic=-1 quiet systemd.show_status=0 modprobe.blacklist=floppy neuron.installtest" \
		-drive file="$WORK/overlay.qcow2",format=qcow2,if=virtio \
		-drive file="$WORK/test.ext4",format=raw,if=virtio,readonly=on \
		</dev/null >"$LOG" 2>&1
	qrc=$?
	# systemd copies the runner's output to the console as "[ uptime] unit[pid]: line".
	tr -d '\r' <"$LOG" | sed -E 's/^\[ *[0-9]+\.[0-9]+\] [A-Za-z0-9_.@-]+\[[0-9]+\]: //' >"$LOG.txt"
	if [ "$attempt" = 2 ] || grep -Eq '^(PASS|FAIL|# ---)' "$LOG.txt" || ! grep -Eq "$QEMU_SPLAT" "$LOG.txt"; then
		break
	fi
	say "the guest kernel crashed before the test started (nothing of ours installed yet); attempt 1 of 2. Its log:"
	grep -E -B5 -A40 "$QEMU_SPLAT" "$LOG.txt" | head -80
	cp "$LOG.txt" "$LOG.boot-crash-1.txt"
done
say "QEMU exited with $qrc after $(($(date +%s) - t0))s"
grep -E '^(PASS|FAIL|# )' "$LOG.txt" | sed 's/^# /  # /'
grep -E '^(PASS|FAIL)' "$LOG.txt" >>"$RESULTS"
if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
	tail -n 30 "$LOG.txt"
	result FAIL "guest_finished_in_time (${TIMEOUT}s)"
elif ! grep -q '^=== NEURON INSTALL TEST END' "$LOG.txt"; then
	tail -n 30 "$LOG.txt"
	result FAIL "guest_reached_the_end"
fi
finish

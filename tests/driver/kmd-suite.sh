#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Second QEMU boot of the driver suite: the kmd backend library
# (runtime/kmd) and its test program (tests/kmd/kmd_test.cpp) against the
# real neuron.ko. Called by run-qemu-suite.sh after its main boot, with
#
#   kmd-suite.sh ROOT WORK KVER VMLINUZ KO BASE_INITRAMFS_DIR RESULTS TIMEOUT
#
# 1. Builds a static kmd_test with g++ (runtime/kernels + runtime/kmd +
#    the test; libdrm.a and OpenBLAS's libopenblas.a), cached by a hash of
#    the sources in WORK/kmd.
# 2. Packs an initramfs: the main boot's (busybox, DRM modules, neuron.ko)
#    with tests/driver/guest-init-kmd.sh as /init and kmd_test.
# 3. Boots it, appends the PASS/FAIL lines to RESULTS, plus a FAIL line for
#    a missing end marker, a timeout or a kernel splat.
# Standalone: NEURON_SUITE_DIR=... bash tests/driver/run-qemu-suite.sh runs it.
set -uo pipefail

# shellcheck source=qemu-boot.sh
. "$(dirname "${BASH_SOURCE[0]}")/qemu-boot.sh"
suite_args kmd "$@"
mkdir -p "$SUITE_WORK/obj"

# --- 1. static kmd_test ---------------------------------------------------------
# The kmd backend and what it builds on: the gate, the scheduler's tiling, the
# programs and tile kernels its engine replays, the backend interface (all of it but
# backend/select.cpp, which would pull in the emu backend), the simulated chip's
# address layout. Whole directories, so that a new file there cannot break the link.
rt=$ROOT/runtime
backend_srcs=()
for f in "$rt"/backend/*.cpp; do [ "$(basename "$f")" = select.cpp ] || backend_srcs+=("$f"); done
srcs=("$rt"/kernels/*.cpp "$rt"/gate/*.cpp "$rt"/program/*.cpp "$rt"/tile/*.cpp "$rt"/sched/*.cpp "$rt"/chip/*.cpp
      "$rt"/kmd/*.cpp "${backend_srcs[@]}" "$ROOT"/tests/kmd/kmd_test.cpp)
hdrs=("$rt"/kernels/*.h "$rt"/gate/*.h "$rt"/program/*.h "$rt"/tile/*.h "$rt"/sched/*.h "$rt"/chip/*.h "$rt"/kmd/*.h "$rt"/backend/*.h
      "$ROOT"/contracts/include/neuron/*.h "$ROOT"/contracts/include/neuron/*.hpp
      "$ROOT"/driver/include/uapi/drm/neuron_accel.h)
BIN=$SUITE_WORK/kmd_test
stamp=$(cat "${srcs[@]}" "${hdrs[@]}" "$0" | sha256sum | cut -d' ' -f1)
if [ ! -x "$BIN" ] || [ "$(cat "$SUITE_WORK/kmd_test.stamp" 2>/dev/null)" != "$stamp" ]; then
	say "building static kmd_test (${#srcs[@]} sources, -j2)"
	t0=$(date +%s)
	BLAS_INC=/usr/include/x86_64-linux-gnu/openblas-pthread
	BLAS_A=/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.a
	[ -f "$BLAS_A" ] || BLAS_A=/usr/lib/x86_64-linux-gnu/libopenblas.a
	CXXFLAGS="-std=c++20 -O2 -g0 -fopenmp -fno-math-errno -fno-trapping-math -fvect-cost-model=dynamic \
		-I$ROOT/contracts/include -I$ROOT/runtime -I$ROOT/runtime/kernels -I$ROOT/runtime/kmd \
		-I$ROOT/driver/include/uapi -I/usr/include/libdrm -I$BLAS_INC"
	# Objects are cached one by one: an object is rebuilt when its source, any
	# header or the flags changed. Names carry the directory (kernels_, kmd_, ...).
	HH=$(cat "${hdrs[@]}" | sha256sum | cut -d' ' -f1)
	export CXXFLAGS SUITE_WORK HH
	: >"$SUITE_WORK/build.log"
	objs=()
	for f in "${srcs[@]}"; do
		objs+=("$SUITE_WORK/obj/$(basename "$(dirname "$f")")_$(basename "$f" .cpp).o")
	done
	if ! printf '%s\n' "${srcs[@]}" | xargs -P2 -I{} sh -c \
		'o=$SUITE_WORK/obj/$(basename "$(dirname "{}")")_$(basename "{}" .cpp).o
		 st=$( (cat "{}"; echo "$HH $CXXFLAGS") | sha256sum | cut -d" " -f1)
		 [ -f "$o" ] && [ "$(cat "$o.stamp" 2>/dev/null)" = "$st" ] && exit 0
		 rm -f "$o" "$o.stamp"
		 g++ $CXXFLAGS -c "{}" -o "$o" 2>>"$SUITE_WORK/build.log" || { echo "compile failed: {}" >>"$SUITE_WORK/build.log"; exit 255; }
		 echo "$st" >"$o.stamp"'; then
		tail -30 "$SUITE_WORK/build.log"
		result_fail kmd_build "kmd_test did not compile; see $SUITE_WORK/build.log"
		exit 0
	fi
	if ! g++ -static -s -fopenmp -o "$BIN" "${objs[@]}" /usr/lib/x86_64-linux-gnu/libdrm.a "$BLAS_A" \
		-lgfortran -lquadmath -lpthread -lm >>"$SUITE_WORK/build.log" 2>&1; then
		tail -30 "$SUITE_WORK/build.log"
		result_fail kmd_build "kmd_test did not link; see $SUITE_WORK/build.log"
		exit 0
	fi
	echo "$stamp" >"$SUITE_WORK/kmd_test.stamp"
	say "built in $(( $(date +%s) - t0 ))s"
fi

# --- 2. initramfs ----------------------------------------------------------------
IRD=$SUITE_WORK/initramfs
rm -rf "$IRD"
cp -a "$BASE_IRD" "$IRD"
cp "$BIN" "$IRD/bin/kmd_test"
cp "$HERE/guest-init-kmd.sh" "$IRD/init"
chmod +x "$IRD/init"
for a in chmod rmmod; do ln -sf busybox "$IRD/bin/$a"; done
(cd "$IRD" && find . | cpio -o -H newc --quiet | gzip -1) >"$SUITE_WORK/initramfs.gz"

# --- 3. boot ---------------------------------------------------------------------
suite_boot "=== NEURON KMD SUITE BEGIN"
grep -E '^(PASS|FAIL)' "$LOG.txt"
grep -E '^# kmd_test' "$LOG.txt"
qemu_boot_verdict kmd "$LOG" "=== NEURON KMD SUITE END" guest-init-kmd.sh "the kmd tests" "$RESULTS"
exit 0

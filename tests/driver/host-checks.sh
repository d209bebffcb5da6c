#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Host-side checks of driver/, run by run-qemu-suite.sh before it boots QEMU:
#   w1_build           the module builds with W=1 (and NEURON_DEBUG=1, the
#                      suite's checks) without a warning
#   checkpatch         scripts/checkpatch.pl --strict (linux-source-6.12):
#                      no errors, no warnings
#   kernel_doc         scripts/kernel-doc -Wall: every uAPI field documented
#   uapi_doc_refs      every @name in a uAPI struct's kernel-doc is a member
#                      of it (tests/driver/uapi-doc-refs.py)
#   uapi_layout        every uAPI struct: no implicit padding (-Wpadded),
#                      size a multiple of 8, valid ISO C11 for userspace
#   build_<release>    the module builds against other 6.12 headers too
#                      (e.g. 6.12.95 with the old drm_sched forms)
#
# usage: host-checks.sh KDIR [EXTRA_KDIR...]
# Prints "PASS: name" / "FAIL: name" lines; reasons on "# " lines.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DRV=$ROOT/driver
WORK=${NEURON_SUITE_DIR:-/var/tmp/neuron-driver-suite}
KDIR=$1
shift
mkdir -p "$WORK"

pass() { echo "PASS: $1"; }
fail() { echo "FAIL: $1"; shift; for l in "$@"; do echo "# $l"; done; }

src_hash() {	# hash of the driver sources plus extra words
	(cat "$DRV"/Kbuild "$DRV"/Makefile "$DRV"/*.[ch] "$DRV"/scripts/conftest.sh \
		"$DRV"/include/uapi/drm/neuron_accel.h; echo "$@") | sha256sum | cut -d' ' -f1
}

# A clean build in its own directory, skipped when the same sources already
# passed against the same tree. $1 name, $2 kdir, rest: make arguments.
clean_build() {
	local name=$1 kdir=$2 dir=$WORK/check-$1
	shift 2
	local stamp
	stamp=$(src_hash "$kdir" "$@")
	if [ "$(cat "$dir.ok" 2>/dev/null)" = "$stamp" ]; then
		pass "$name (cached)"
		return
	fi
	rm -rf "$dir" "$dir.ok"
	if ! "$DRV/build.sh" "$dir" "$kdir" -j2 "$@" >"$dir.log" 2>&1; then
		fail "$name" "build failed, see $dir.log" "$(grep -m5 -E 'error|warning' "$dir.log")"
		return
	fi
	if grep -q 'warning:' "$dir.log"; then
		fail "$name" "$(grep -m10 'warning:' "$dir.log")"
		return
	fi
	echo "$stamp" >"$dir.ok"
	pass "$name"
	local have
	have=$(grep -o '^#define NEURON_HAVE_[A-Z_]*' "$dir/neuron_config.h" | cut -d' ' -f2 | tr '\n' ' ')
	echo "# $name: header probes found: ${have:-none (the original 6.12 drm_sched forms)}"
}

clean_build w1_build "$KDIR" W=1 NEURON_DEBUG=1
for k in "$@"; do
	clean_build "build_$(basename "$(readlink -f "$k")" | sed 's/^linux-headers-//')" "$k"
done

# checkpatch.pl and kernel-doc with their data files, from linux-source-6.12.
CP=$WORK/checkpatch
if [ ! -f "$CP/scripts/checkpatch.pl" ]; then
	tarball=$(ls /usr/src/linux-source-6.12.tar.* 2>/dev/null | head -1)
	if [ -z "$tarball" ]; then
		fail checkpatch "/usr/src/linux-source-6.12.tar.* missing (apt-get install linux-source-6.12)"
	else
		echo "# extracting checkpatch.pl, spelling.txt, const_structs.checkpatch, kernel-doc from $tarball"
		mkdir -p "$CP"
		tar -xf "$tarball" -C "$CP" --strip-components=1 \
			linux-source-6.12/scripts/checkpatch.pl \
			linux-source-6.12/scripts/spelling.txt \
			linux-source-6.12/scripts/const_structs.checkpatch \
			linux-source-6.12/scripts/kernel-doc
	fi
fi
if [ -f "$CP/scripts/checkpatch.pl" ]; then
	cd "$DRV"
	out=$(perl "$CP/scripts/checkpatch.pl" --strict --no-tree --terse --show-types \
		-f ./*.c ./*.h include/uapi/drm/neuron_accel.h 2>&1)
	if echo "$out" | grep -E '(ERROR|WARNING):' >/dev/null; then
		mapfile -t lines < <(echo "$out" | grep -E '(ERROR|WARNING):' | head -20)
		fail checkpatch "${lines[@]}"
	else
		pass checkpatch
		echo "$out" | grep 'CHECK:' | sed 's/^/# /'
	fi
	out=$(perl "$CP/scripts/kernel-doc" -none -Wall ./*.c ./*.h \
		include/uapi/drm/neuron_accel.h 2>&1)
	if [ -n "$out" ]; then
		mapfile -t lines < <(echo "$out" | head -20)
		fail kernel_doc "${lines[@]}"
	else
		pass kernel_doc
	fi
	cd - >/dev/null
fi

# The uAPI's kernel-doc names only members that exist.
if out=$(python3 "$ROOT/tests/driver/uapi-doc-refs.py" "$DRV/include/uapi/drm/neuron_accel.h" 2>&1); then
	pass uapi_doc_refs
else
	mapfile -t lines < <(echo "$out" | head -20)
	fail uapi_doc_refs "${lines[@]}"
fi

# uAPI layout: no implicit padding anywhere, sizes multiples of 8.
common=$(readlink -f "$KDIR/Makefile" | sed 's|-amd64/Makefile$|-common|')
[ -d "$common/include/uapi/drm" ] || common=$(readlink -f "$KDIR")
L=$WORK/layout
mkdir -p "$L/drm"
for h in drm.h drm_mode.h; do
	sed 's/__user //g' "$common/include/uapi/drm/$h" >"$L/drm/$h"
done
{
	echo '#pragma GCC diagnostic push'
	echo '#pragma GCC diagnostic ignored "-Wpadded"'
	echo '#pragma GCC diagnostic ignored "-Wpedantic"'
	echo '#include <drm/drm.h>'
	echo '#pragma GCC diagnostic pop'
	echo '#include <drm/neuron_accel.h>'
	grep -oE '^struct drm_neuron_[a-z0-9_]+ \{' "$DRV/include/uapi/drm/neuron_accel.h" |
		sed 's/ {$//' | while read -r _ s; do
			echo "_Static_assert(sizeof(struct $s) % 8 == 0, \"$s: size not a multiple of 8\");"
			echo "struct $s v_$s;"
		done
} >"$L/layout.c"
n=$(grep -c '_Static_assert' "$L/layout.c")
if out=$(gcc -std=c11 -pedantic -Wall -Wextra -Wpadded -Werror -fsyntax-only \
		-I"$DRV/include/uapi" -I"$L" -idirafter "$L/drm" "$L/layout.c" 2>&1); then
	pass uapi_layout
	echo "# $n uAPI structs: no implicit padding, sizes multiples of 8"
else
	mapfile -t lines < <(echo "$out" | grep -E 'error|warning' | head -10)
	fail uapi_layout "${lines[@]}"
fi

#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
#
# Build neuron.ko out of the source tree (Kbuild in 6.12 writes objects next
# to the sources, so they are mirrored into OUTDIR first; unchanged files keep
# their timestamps and the build stays incremental).
#
# usage: build.sh OUTDIR [KDIR] [make arguments, e.g. W=1]
set -eu
src=$(cd "$(dirname "$0")" && pwd)
out=$1
kdir=${2:-/lib/modules/$(uname -r)/build}
[ $# -ge 2 ] && shift 2 || shift $#

if [ ! -d "$kdir" ]; then
	echo "build.sh: kernel build tree $kdir not found; install linux-headers-<release> or set kernel_dir" >&2
	exit 1
fi
mkdir -p "$out/scripts" "$out/include/uapi/drm"
cd "$src"
for f in Kbuild Makefile ./*.c ./*.h scripts/conftest.sh include/uapi/drm/neuron_accel.h; do
	f=${f#./}
	[ -f "$src/$f" ] || continue
	cmp -s "$src/$f" "$out/$f" || cp "$src/$f" "$out/$f"
done
make -C "$out" KDIR="$kdir" "$@" modules

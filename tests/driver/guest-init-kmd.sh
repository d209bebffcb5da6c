#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
#
# /init of the kmd boot of the QEMU suite (tests/driver/kmd-suite.sh): loads
# the DRM modules and neuron.ko (2 trn2 devices, 256 MiB HBM each), runs
# kmd_test (runtime/kmd against the driver) and powers off.
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
echo 5 >/proc/sys/kernel/printk
# QEMU's default TCG CPU (qemu64) says "AuthenticAMD" without SSSE3, so
# OpenBLAS's runtime dispatch picks its OPTERON_SSE3 kernels, which use the
# 3DNow! FEMMS instruction TCG does not implement (SIGILL in sgemm). Pin a
# plain SSE3 kernel set; real hosts need nothing like this.
export OPENBLAS_CORETYPE=Prescott

for m in $(cat /modules.order); do
	insmod /lib/modules/$m || echo "# insmod $m failed"
done

echo "=== NEURON KMD SUITE BEGIN"
if insmod /lib/modules/neuron.ko devices=2 hbm_mib=256; then
	# 0666 so the unprivileged-controller test can open the node as uid 1000.
	chmod 0666 /dev/accel/accel*
	kmd_test
	# Every context, BO, mapping and engine of the tests is gone: unload works.
	if rmmod neuron; then
		echo "PASS: kmd_module_unload_after_tests"
	else
		echo "FAIL: kmd_module_unload_after_tests"
	fi
else
	echo "FAIL: kmd_module_load"
fi
echo "=== NEURON KMD SUITE END"
echo "=== DMESG BEGIN"
dmesg
echo "=== DMESG END"
poweroff -f

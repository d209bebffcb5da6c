#!/bin/bash
# Builds (once per content hash) the Debian 12 host image the install test boots:
# mmdebstrap minbase from Debian's archive with systemd as PID 1, udev, DKMS and
# Debian's 6.12 kernel and headers from bookworm-backports, plus what the packages
# under test depend on (the guest has no network: -nic none), a torch 2.13 CPU
# virtual environment for the wheel's test, and the test runner unit.
#
#   bash tests/install/host-image.sh     -> prints the image directory
#
# The directory holds root.ext4 (raw ext4, the guest's /dev/vda), vmlinuz, initrd.img.
# Cold: ~3-6 minutes (downloads ~400 MB of .debs and a torch wheel); warm: instant.
set -euo pipefail
SUITE=host-image
. "$(dirname "$0")/lib.sh"

TORCH_REQ="torch==2.13.0+cpu"
TORCH_INDEX=${NEURON_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}

# Runtime dependencies of the packages under test, and the test's own tools.
# (shlibs of neurond, libneuron1 and the tools; python3 for the wheel and for the
# Prometheus text parser the metrics check uses.)
GUEST_PACKAGES=(
	systemd-sysv udev kmod initramfs-tools apt procps
	dkms gcc make libc6-dev
	linux-image-amd64/bookworm-backports linux-headers-amd64/bookworm-backports
	libprotobuf32 libopenblas0-pthread libgomp1 libdrm2 libncursesw6 libboost-system1.74.0
	python3 python3-venv python3-prometheus-client
)

key=$(files_hash "$INSTALL_TESTS/host-image.sh" "$INSTALL_TESTS"/guest/neuron-install-test.*)
out=$CI_CACHE/images/host-$key
if cache_ready "$out"; then
	echo "$out"
	exit 0
fi

need_debs mmdebstrap e2fsprogs
cache_begin "$out"
work=$out/work
mkdir -p "$work/wheels"

say "downloading $TORCH_REQ and its dependencies for the guest's virtual environment"
python3 -m pip download -q --dest "$work/wheels" --only-binary=:all: \
	--extra-index-url "$TORCH_INDEX" "$TORCH_REQ" >&2 ||
	die "pip could not download $TORCH_REQ (needs the CPU wheel index or a local copy)"

say "mmdebstrap: Debian 12 minbase + bookworm-backports 6.12 kernel into $work/rootfs (a few minutes)"
hooks=(
	--customize-hook='echo root:root | chroot "$1" chpasswd'
	--customize-hook='printf "LABEL=rootfs / ext4 rw,discard 0 1\n" >"$1/etc/fstab"'
	--customize-hook='echo neuron-host >"$1/etc/hostname"'
	# An air-gapped host: apt knows only the local repository the test adds.
	--customize-hook='rm -f "$1/etc/apt/sources.list"; rm -rf "$1"/var/lib/apt/lists/*'
	--customize-hook="copy-in $INSTALL_TESTS/guest/neuron-install-test.service /etc/systemd/system/"
	--customize-hook="copy-in $INSTALL_TESTS/guest/neuron-install-test-runner /usr/local/sbin/"
	--customize-hook='chroot "$1" systemctl enable neuron-install-test.service'
	# torch for the wheel's test: a dependency from PyPI, installed as an operator
	# would (pip into a virtual environment), from the downloaded wheels.
	--customize-hook="copy-in $work/wheels /opt"
	--customize-hook='chroot "$1" python3 -m venv /opt/torch-venv'
	--customize-hook="chroot \"\$1\" /opt/torch-venv/bin/pip install -q --no-index --find-links /opt/wheels '$TORCH_REQ'"
)
mmdebstrap --mode=root --variant=minbase --include="$(IFS=,; echo "${GUEST_PACKAGES[*]}")" \
	"${hooks[@]}" bookworm "$work/rootfs" \
	"deb $DEBIAN_MIRROR bookworm main" "deb $DEBIAN_MIRROR bookworm-backports main" \
	>"$work/mmdebstrap.log" 2>&1 || { tail -30 "$work/mmdebstrap.log"; die "mmdebstrap failed"; }

kver=$(ls "$work/rootfs/lib/modules" | sort -V | tail -n 1)
case "$kver" in 6.12.*) ;; *) die "the image's kernel is $kver, not 6.12 from bookworm-backports" ;; esac
cp "$work/rootfs/boot/vmlinuz-$kver" "$out/vmlinuz"
cp "$work/rootfs/boot/initrd.img-$kver" "$out/initrd.img"
echo "$kver" >"$out/kernel-release"
say "making the ext4 disk image (kernel $kver)"
mke2fs -q -t ext4 -L rootfs -d "$work/rootfs" "$out/root.ext4" 8G
rm -rf "$work"
cache_done "$out"
cache_prune "$CI_CACHE/images/host-" 2
echo "$out"

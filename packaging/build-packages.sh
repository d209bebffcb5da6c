#!/usr/bin/env bash
# Builds the Debian packages (dpkg-buildpackage -us -uc -b with debhelper's dh) and the
# torch_neuron wheel from this source tree, and checks the packages with lintian.
#
#   bash packaging/build-packages.sh OUTDIR [--version V] [--no-wheel]
#
# OUTDIR gets neuron-dkms_V_all.deb, neuron-runtime_V_amd64.deb, libneuron1_..,
# libneuron-dev_.., neuron-tools_.., torch_neuron-0.1.0-cp311-cp311-linux_x86_64.whl,
# lintian.txt and build.log. --version builds the same tree as version V (a newer
# changelog entry), as the install test does for its upgrade. Installs the build
# dependencies (Debian's, Meson from bookworm-backports; the wheel's from the stack's
# virtual environment) when missing. Uses ccache in NEURON_CI_CACHE/ccache.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:?usage: build-packages.sh OUTDIR [--version V] [--no-wheel]}
shift
version="" wheel=1
while (($#)); do
	case $1 in
	--version) version=$2; shift 2 ;;
	--no-wheel) wheel=0; shift ;;
	*) echo "build-packages: unknown argument $1" >&2; exit 2 ;;
	esac
done
cache=${NEURON_CI_CACHE:-/var/cache/neuron-ci}
say() { echo "[build-packages] $*"; }
die() { echo "[build-packages] error: $*" >&2; exit 1; }

# --- build dependencies ----------------------------------------------------------
# Debian 12's Meson (1.0) is older than the build needs (>= 1.1): bookworm-backports
# has 1.7. Only meson comes from there.
# shellcheck source=../tools/setup/backports.sh
. "$root/tools/setup/backports.sh"
ensure_bookworm_backports || apt-get update -qq
build_tools=(dpkg-dev debhelper dh-dkms bash-completion lintian help2man ccache fakeroot)
build_deps=(g++ libboost-dev libboost-system-dev libcli11-dev libdrm-dev libncurses-dev libopenblas-dev
	libprotobuf-dev ninja-build nlohmann-json3-dev pkgconf protobuf-compiler)
missing=()
for p in "${build_tools[@]}" "${build_deps[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
dpkg --compare-versions "$(dpkg-query -W -f='${Version}' meson 2>/dev/null || echo 0)" ge 1.1 || missing+=(meson/bookworm-backports)
if ((${#missing[@]})); then
	say "installing build dependencies: ${missing[*]}"
	apt-get update -qq || true
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/tmp/neuron-build-deps.log 2>&1 ||
		{ tail -20 /tmp/neuron-build-deps.log; die "installing build dependencies failed"; }
fi

# --- a clean copy of the tracked sources, debian/ from packaging/debian ------------
# A fixed path, so that ccache hits whatever OUTDIR is.
stage=/var/tmp/neuron-package-build
src=$stage/neuron
# The stage stays until the next build (its obj-* tree is handy for debugging).
mkdir -p "$src" "$out"
(cd "$root" && git ls-files -z --cached --others --exclude-standard | xargs -0 tar -c --no-recursion -f - 2>/dev/null || true) | tar -x -C "$src"
[ -f "$src/meson.build" ] || die "copying the sources failed"
rm -rf "$src/debian"
cp -rL "$root/packaging/debian" "$src/debian"
if [ -n "$version" ]; then
	{
		echo "neuron ($version) unstable; urgency=medium"
		echo
		echo "  * Rebuild of the same sources (the install test's upgrade)."
		echo
		echo " -- $(sed -n 's/^Maintainer: //p' "$src/debian/control")  $(date -R)"
		echo
		cat "$src/debian/changelog"
	} >"$src/debian/changelog.new"
	mv "$src/debian/changelog.new" "$src/debian/changelog"
fi
version=$(cd "$src" && dpkg-parsechangelog -S Version)

# --- the .debs -------------------------------------------------------------------
say "dpkg-buildpackage -us -uc -b: neuron $version (log: $out/build.log)"
export CCACHE_DIR=$cache/ccache
mkdir -p "$CCACHE_DIR"
# Debian's toolchain only (not a developer's pyenv or virtualenv meson): a clean PATH.
(
	cd "$src"
	PATH=/usr/lib/ccache:/usr/sbin:/usr/bin:/sbin:/bin \
		DEB_BUILD_OPTIONS="nocheck parallel=${NEURON_BUILD_JOBS:-2}" \
		dpkg-buildpackage -us -uc -b
) >"$out/build.log" 2>&1 || { tail -40 "$out/build.log"; die "dpkg-buildpackage failed; see $out/build.log"; }
mv "$stage"/*.deb "$out/"
rm -f "$stage"/*.buildinfo "$stage"/*.changes

# --- lintian ---------------------------------------------------------------------
say "lintian"
lintian --info --display-info --pedantic "$out"/*.deb >"$out/lintian.txt" 2>&1 || true
if grep -q '^E: ' "$out/lintian.txt"; then
	grep '^E: ' "$out/lintian.txt"
	die "lintian reports errors (all of it: $out/lintian.txt)"
fi
sed 's/^/  /' "$out/lintian.txt" | grep -E '^  [WIP]: ' | sort | uniq -c | sort -rn | head -40 || true

# --- the wheel -------------------------------------------------------------------
if [ "$wheel" = 1 ]; then
	say "torch_neuron wheel, linked against this build's libneuron.so.1 (the libneuron1 package's)"
	# shellcheck source=../tools/setup/use-venv.sh
	. "$root/tools/setup/use-venv.sh" --torch
	obj=$(ls -d "$src"/obj-*)
	PATH=/usr/lib/ccache:$PATH TORCH_DEVICE_BACKEND_AUTOLOAD=0 python3 -m pip wheel --no-build-isolation --no-deps -w "$out" \
		-Cbuild-dir="$stage/wheel-build" -Csetup-args=-Dneuron_build="$obj" \
		-Csetup-args=-Dbundle_libneuron=false -Ccompile-args=-j"${NEURON_BUILD_JOBS:-2}" \
		"$src/torch_plugin" >>"$out/build.log" 2>&1 ||
		{ tail -30 "$out/build.log"; die "the wheel did not build; see $out/build.log"; }
	# Requires-Dist: torch==<the torch it was built against> (its C++ ABI matches no other).
	python3 "$src/torch_plugin/tools/pin_torch.py" "$out"/torch_neuron-*.whl >>"$out/build.log"
fi
# The stage stays until the next build (its obj-* tree is handy for debugging).
say "done: $(cd "$out" && ls *.deb *.whl 2>/dev/null | tr '\n' ' ')"

#!/usr/bin/env bash
# Installs what the userspace build, the demo and the tests need, from Debian's and
# PyPI's registries (PyPI's into the stack's virtual environment, see python-env.sh).
# Idempotent: packages already present are not touched again.
#   install-deps.sh          build + demo dependencies
#   install-deps.sh --test   also the test-only ones (clang/libFuzzer, tmux, iproute2)
set -euo pipefail

want_test=0
[[ "${1:-}" == "--test" ]] && want_test=1

# What each package is for (also in the README's dependency table).
apt_packages=(
	build-essential pkg-config        # compilers; pkg-config lookups in Meson
	python3 python3-venv              # the virtual environment for Meson, Ninja, pytest, torch
	libboost-dev libboost-system-dev  # Boost.Asio: neurond's socket and signal loop
	protobuf-compiler libprotobuf-dev # the control-plane messages
	libopenblas-dev                   # GEMM for thin products, non-AVX-512 hosts; a benchmark reference
	libblis4-pthread                  # BLIS: a second GEMM reference for bench-runtime (loaded with dlopen)
	libcriterion-dev                  # C/C++ test suites
	nlohmann-json3-dev                # neuron-ls -j and other JSON output
	libcli11-dev                      # command-line and config-file parsing
	libdrm-dev                        # the kmd backend's ioctls (DRM accel driver)
	libncurses-dev                    # neuron-top (terminal UI)
)
if [[ $want_test == 1 ]]; then
	# libFuzzer, sanitizer and OpenMP runtimes for clang; tmux drives the TUI tests
	apt_packages+=(clang libclang-rt-14-dev libomp-14-dev tmux)
	# ccache: Meson compiles through it when it is on PATH; CI keeps its cache
	# (.ci/run) so a warm run does not rebuild the four build trees from scratch
	apt_packages+=(ccache)
	# libgfortran.a: the QEMU suite's static kmd_test links OpenBLAS's LAPACK (the
	# chip's linear-algebra kernels), which is Fortran
	apt_packages+=(libgfortran-12-dev)
	# The install test (tests/install): the host image and booting it. Installed here,
	# before its image is built in the background, so no two apt runs overlap.
	apt_packages+=(mmdebstrap e2fsprogs qemu-system-x86 qemu-utils apt-utils)
	# ip netns / veth: tests/torch/test_dist_two_hosts.py's two simulated hosts
	apt_packages+=(iproute2)
fi

missing=()
for p in "${apt_packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
	echo "install-deps: installing Debian packages: ${missing[*]}"
	SUDO=""
	[[ $(id -u) -ne 0 ]] && SUDO="sudo"
	$SUDO apt-get update -qq || echo "install-deps: apt-get update reported errors (continuing with the lists it has)"
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
	echo "install-deps: Debian packages already installed"
fi

# Meson, Ninja, meson-python and pytest: in the stack's virtual environment
# (<repo>/.venv, tools/setup/python-env.sh), never in the system Python (PEP 668).
bash "$(dirname "${BASH_SOURCE[0]}")/python-env.sh"

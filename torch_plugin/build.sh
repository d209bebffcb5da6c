#!/bin/bash
# Builds and installs torch_neuron into the stack's virtual environment (.venv), against
# its torch==2.13.0+cpu and the stack's Meson build tree (default: <repo>/build).
# Idempotent; incremental (the Meson build dir is torch_plugin/.build).
# Never uses pip build isolation (which would download another torch).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
stack_build=${NEURON_BUILD_DIR:-$root/build}
# The stack's virtual environment (NEURON_VENV, default <repo>/.venv) with
# torch==2.13.0+cpu, meson-python, meson, ninja: tools/setup/python-env.sh installs
# them there, and only PyTorch's CPU build.
. "$root/tools/setup/use-venv.sh" --torch
py=python3

if [ ! -e "$stack_build/libneuron/libneuron.so.1" ]; then
	[ -e "$stack_build/build.ninja" ] || meson setup "$stack_build" "$root"
	ninja -C "$stack_build" -j2 libneuron/libneuron.so.1.0.0 daemon/neurond
fi

# Build the wheel, pin it to the torch it was built against (its C++ ABI matches
# no other), then install it.
dist="$here/.build/dist"
rm -rf "$dist"
TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$py" -m pip wheel --no-build-isolation --no-deps -w "$dist" \
	-Cbuild-dir="$here/.build" -Csetup-args=-Dneuron_build="$stack_build" \
	-Ccompile-args=-j2 "$here"
"$py" "$here/tools/pin_torch.py" "$dist"/torch_neuron-*.whl
TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$py" -m pip install --no-deps --force-reinstall "$dist"/torch_neuron-*.whl
echo "torch_neuron installed in ${VIRTUAL_ENV:-$("$py" -c "import sys; print(sys.prefix)")}; check: $py -c \"import torch; print(torch.randn(3).to('neuron'))\" (needs neurond, see torch_plugin/README.md)"

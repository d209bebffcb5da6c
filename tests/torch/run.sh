#!/bin/bash
# Runs the torch_neuron pytest suite (it starts and stops its own neurond:
# $NEURON_DAEMON, default build/daemon/neurond). Extra arguments go to pytest.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
export NEURON_DAEMON=${NEURON_DAEMON:-$root/build/daemon/neurond}
cd "$root"
# pytest, torch (CPU build) and the build tools come from the stack's virtual
# environment (.venv; tools/setup/python-env.sh).
. tools/setup/use-venv.sh --torch || exit 1
# scipy (reference distributions of the RNG tests); pyarrow (the profiler's
# Parquet export; its test skips with a reason without it).
python3 -c 'import pytest, scipy, pyarrow' 2>/dev/null || python3 -m pip install -q pytest scipy pyarrow
# torch.testing._internal (the OpInfo database the sweep and the device-generic
# tests read) imports expecttest.
python3 -c 'import expecttest' 2>/dev/null || python3 -m pip install -q expecttest
# Build and install the plugin first (idempotent, incremental).
if ! bash torch_plugin/build.sh >build/torch-plugin-build.log 2>&1; then
	tail -n 40 build/torch-plugin-build.log
	echo "torch_plugin/build.sh failed; full log: build/torch-plugin-build.log"
	exit 1
fi
exec python3 -m pytest "$here" -p no:cacheprovider -rfEs "$@"

#!/bin/bash
# Runs the torch_neuron pytest suite (it starts and stops its own neurond:
# $NEURON_DAEMON, default build/daemon/neurond). Extra arguments go to pytest.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
export NEURON_DAEMON=${NEURON_DAEMON:-$root/build/daemon/neurond}
cd "$root"
exec python3 -m pytest "$here" -p no:cacheprovider -rfEs "$@"

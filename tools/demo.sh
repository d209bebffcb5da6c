#!/usr/bin/env bash
# The README's first command: builds the stack, starts neurond on the simulated
# chip, runs an example tenant that checks its device results against the CPU,
# shows neuron-ls while it is connected, and stops neurond.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

step() { printf '\n==> %s\n' "$*"; }

step "Installing build dependencies (Debian packages; Meson and PyTorch's CPU build from PyPI into .venv) if missing"
bash tools/setup/install-deps.sh
. tools/setup/use-venv.sh --torch

step "Building (meson + ninja, in build/)"
[[ -f build/build.ninja ]] || meson setup build >/dev/null
ninja -C build -j"$(nproc)" >/dev/null
echo "built: build/daemon/neurond, build/libneuron/libneuron.so, build/tools/neuron-ls/neuron-ls"

work=$(mktemp -d /tmp/neuron-demo-XXXXXX)
export NEURON_SOCKET=$work/neurond.sock
daemon_pid=""
cleanup() {
	if [[ -n "$daemon_pid" ]] && kill -0 "$daemon_pid" 2>/dev/null; then
		kill -TERM "$daemon_pid"
		wait "$daemon_pid" || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

step "Starting neurond (simulated trn2 chip, 4 cores, 8 GiB HBM) on $NEURON_SOCKET"
build/daemon/neurond --cores 4 --hbm-mib 8192 2>"$work/neurond.log" &
daemon_pid=$!
for _ in $(seq 100); do
	[[ -S "$NEURON_SOCKET" ]] && break
	sleep 0.05
done
[[ -S "$NEURON_SOCKET" ]] || { cat "$work/neurond.log"; echo "neurond did not start"; exit 1; }

step "Running an example tenant: matmul + elementwise + softmax on the device, checked on the CPU"
build/tools/neuron-demo/neuron-demo --size 256 --linger 1.5 &
tenant=$!
sleep 0.7

step "neuron-ls -w while the tenant is connected"
build/tools/neuron-ls/neuron-ls -w
wait "$tenant"

for extra in tools/demo.d/*.sh; do
	[[ -f "$extra" ]] || continue
	step "$(sed -n 's/^# demo: //p' "$extra" | head -n1)"
	bash "$extra"
done

step "Stopping neurond (SIGTERM)"
kill -TERM "$daemon_pid"
wait "$daemon_pid" && echo "neurond exited cleanly"
daemon_pid=""
echo
echo "neurond's log (one line per event):"
sed 's/^/  /' "$work/neurond.log"

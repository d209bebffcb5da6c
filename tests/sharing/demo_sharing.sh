#!/usr/bin/env bash
# Demo of capacity sharing (issue 5): a training tenant and an inference tenant on a
# private neurond with the automatic policy. Inference load drops -> its cores are lent
# and training speeds up; inference load returns -> the cores are reclaimed within
# the deadline. A neuron-top snapshot at each phase.
#
#   tests/sharing/demo_sharing.sh [BUILD_DIR]        (default: build)
set -euo pipefail
build=${1:-build}
dir=$(mktemp -d /tmp/neuron-sharing-demo-XXXXXX)
export NEURON_SOCKET=$dir/neurond.sock
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT

"$build/daemon/neurond" --socket "$NEURON_SOCKET" --devices 1 --cores 4 --hbm-mib 1024 --threads-per-core 1 \
	--policy auto --auto-reclaim-depth 6 --auto-lend-depth 1 --auto-hold-ms 1000 --reclaim-deadline-ms 20 \
	--log-level warn >"$dir/neurond.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [[ -S $NEURON_SOCKET ]] && break; sleep 0.1; done

# The two tenants (tests/sharing/demo_tenant.cpp). The inference tenant comes first
# and busy from its first request: until both exist and inference is loaded, the auto
# policy sees an idle inference pool and would lend its cores (the story would open
# with loans).
echo busy >"$dir/infer.load"
"$build/tests/sharing/demo-tenant" inference 1 "$dir/infer.rate" "$dir/infer.load" &
pids+=($!)
sleep 0.3
"$build/tests/sharing/demo-tenant" training 2 "$dir/train.rate" &
pids+=($!)
rate() { cat "$1" 2>/dev/null || echo "?"; }
snap() { echo; echo "=== $1 ==="; "$build/tools/neuron-top/neuron-top" --once --interval 500 | sed -n '1,20p'; }
active_loans() { "$build/tools/neuronctl/neuronctl" --json loans | grep -c '"state": "active"' || true; }

# Warm-up: wait until the policy has settled under inference load, i.e. no active
# loan for 2.5 s in a row (longer than --auto-hold-ms, so a lend would have shown).
# On a slow or busy host the policy may lend before the inference tenant is up to
# speed; "busy" (depth 2-3) sits inside the hysteresis band and would leave those
# loans in place, so a short burst (depth >= 6) makes the policy reclaim them.
quiet=0
for _ in $(seq 60); do
	if [[ $(active_loans) -eq 0 ]]; then
		quiet=$((quiet + 1))
	else
		quiet=0
		echo burst >"$dir/infer.load"
		sleep 0.5
		echo busy >"$dir/infer.load"
	fi
	((quiet >= 5)) && break
	sleep 0.5
done
((quiet >= 5)) || echo "demo: the auto policy did not settle: loans active under inference load" >&2
snap "phase 1: inference busy, no loans"
echo "training rate: $(rate "$dir/train.rate") matmuls/s"

echo idle >"$dir/infer.load"
sleep 3
snap "phase 2: inference idle -> the auto policy lent its cores"
echo "training rate: $(rate "$dir/train.rate") matmuls/s (with borrowed cores)"

echo burst >"$dir/infer.load"
sleep 2
snap "phase 3: inference load is back -> cores reclaimed"
echo "training rate: $(rate "$dir/train.rate") matmuls/s"
echo
echo "=== loans and reclaim latencies ==="
"$build/tools/neuronctl/neuronctl" loans
echo
"$build/tools/neuronctl/neuronctl" events | tail -8

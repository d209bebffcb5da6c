#!/usr/bin/env bash
# Drives neuron-top in tmux against a private neurond and reads the screen: the panes
# are drawn, the help and tab keys work, q quits; --once and --json print snapshots.
# Usage: test_neuron_top.sh NEUROND NEURON_TOP NEURONCTL
set -euo pipefail
neurond=$1 top=$2 ctl=$3
dir=$(mktemp -d /tmp/neuron-top-test-XXXXXX)
sock=$dir/neurond.sock
session="ntop-$$"
pass=0 fail=0
cleanup() {
	tmux kill-session -t "$session" 2>/dev/null || true
	[[ -n "${dpid:-}" ]] && kill "$dpid" 2>/dev/null && wait "$dpid" 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT
check() { # name, command...
	local name=$1; shift
	if "$@"; then pass=$((pass + 1)); echo "ok   $name"; else fail=$((fail + 1)); echo "FAIL $name"; fi
}
"$neurond" --socket "$sock" --devices 2 --cores 4 --hbm-mib 256 --spin-us 20 --threads-per-core 1 >"$dir/log" 2>&1 &
dpid=$!
for _ in $(seq 50); do [[ -S $sock ]] && break; sleep 0.1; done
export NEURON_SOCKET=$sock
"$ctl" lend --from inference --count 1 --device 0 >/dev/null

once=$("$top" --once --interval 200)
check "once: core grid" grep -q "NeuronCore utilisation, owner and lease" <<<"$once"
check "once: borrowed core shown" grep -q "training  borrowed" <<<"$once"
check "once: memory pane" grep -q "ND1  HBM" <<<"$once"
check "once: loans pane" grep -q "inference  training   active" <<<"$once"
json=$("$top" --json --interval 200)
check "json: schema" grep -q '"schema": "neuron-capacity/1"' <<<"$json"
check "json: utilisation per core" grep -q '"utilisation"' <<<"$json"

tmux new-session -d -s "$session" -x 160 -y 45 "NEURON_SOCKET=$sock $top --interval 200"
screen() { tmux capture-pane -p -t "$session"; }
wait_for() { for _ in $(seq 40); do screen | grep -q -- "$1" && return 0; sleep 0.1; done; return 1; }
check "tui: panes drawn" wait_for "Tenants (sort: id)"
tmux send-keys -t "$session" h
check "tui: help on h" wait_for "Lease states:"
tmux send-keys -t "$session" x
check "tui: help closes" wait_for "Loans"
tmux send-keys -t "$session" s
check "tui: sort key" wait_for "Tenants (sort: ops/s)"
tmux send-keys -t "$session" q
gone=0; for _ in $(seq 30); do tmux has-session -t "$session" 2>/dev/null || { gone=1; break; }; sleep 0.1; done
check "tui: q quits" test $gone = 1
echo "neuron-top: $pass passed, $fail failed"
[[ $fail == 0 ]]

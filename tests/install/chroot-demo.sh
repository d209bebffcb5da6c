#!/bin/bash
# The README's demo command on a stock Debian 12 (issue 15 item 5): a root filesystem
# as a newcomer's server has it (mmdebstrap minbase plus python3 and git; cached by
# the hash of this script), a copy of this tree in it, and `bash tools/demo.sh` run
# there with chroot to the end. Debian 12's Python is externally managed (PEP 668),
# so this fails if any step installs into the system Python or needs a tool the
# stock system lacks.
#
#   bash tests/install/chroot-demo.sh [COMMAND]     default COMMAND: bash tools/demo.sh
#
# Each run starts from the pristine root filesystem (an overlay: nothing of a
# previous run remains) inside a private mount namespace (every mount goes when it
# ends). The chroot reaches Debian's archive and PyPI through the host's network;
# the host's pip configuration and /opt/wheels stand in for PyTorch's CPU wheel
# index (bind-mounted read-only when present). Test harness additions, not part of
# the stock system: ccache (persistent in NEURON_CI_CACHE/ccache-chroot, so a warm
# run does not recompile everything) and a persistent apt download cache.
# Prints "N passed, N failed".
set -uo pipefail
SUITE=chroot-demo
. "$(dirname "$0")/lib.sh"
START=$(date +%s)
COMMAND=${1:-bash tools/demo.sh}
WORK=${NEURON_CHROOT_WORK:-/var/tmp/neuron-chroot-demo}
TIMEOUT=${NEURON_CHROOT_TIMEOUT:-5400}
passed=0 failed=0
pass() { echo "PASS: $1"; passed=$((passed + 1)); }
fail() { echo "FAIL: $1${2:+ ($2)}"; failed=$((failed + 1)); }
finish() {
	say "total time $(($(date +%s) - START))s"
	echo "$passed passed, $failed failed"
	[ "$failed" = 0 ]
	exit
}

need_debs mmdebstrap

# --- the stock root filesystem -------------------------------------------------------
# The recipe is the cache key: change it and the root filesystem is built anew.
ROOTFS_RECIPE=(--mode=root --variant=minbase --include=python3,git,ccache bookworm)
key=$(echo "${ROOTFS_RECIPE[*]} $DEBIAN_MIRROR" | sha256sum | cut -c1-16)
base=$CI_CACHE/images/chroot-$key
if ! cache_ready "$base"; then
	cache_begin "$base"
	say "mmdebstrap: Debian 12 minbase + python3, git (+ ccache for the harness) into $base/rootfs"
	mmdebstrap "${ROOTFS_RECIPE[@]}" "$base/rootfs" \
		"deb $DEBIAN_MIRROR bookworm main" >"$base/mmdebstrap.log" 2>&1 ||
		{ tail -20 "$base/mmdebstrap.log"; fail rootfs_built; finish; }
	cache_done "$base"
	cache_prune "$CI_CACHE/images/chroot-" 2
fi

# --- the run ---------------------------------------------------------------------------
rm -rf "$WORK"
mkdir -p "$WORK"/{upper,ovwork,root} "$CI_CACHE/ccache-chroot" "$CI_CACHE/apt-archives-chroot/partial"
# This tree as a clone would have it (tracked and new files; not build dirs or .venv).
(cd "$REPO_ROOT" && git ls-files -z --cached --others --exclude-standard | xargs -0 tar -c --no-recursion -f - 2>/dev/null) \
	>"$WORK/tree.tar"
binds=""
for d in /opt/wheels /opt/pypi /opt/pypi-more; do
	[ -d "$d" ] && binds+="mkdir -p \$R$d && mount --bind -o ro $d \$R$d; "
done
# pip's configuration (global, and root's: the chroot runs as root) and the CA
# bundles it names: the machine's registries are reached the way the host reaches them.
bind_file() { # host-file chroot-path
	binds+="mkdir -p \$R$(dirname "$2") && touch \$R$2 && mount --bind -o ro $1 \$R$2; "
}
[ -f /etc/pip.conf ] && bind_file /etc/pip.conf /etc/pip.conf
[ -f "$HOME/.config/pip/pip.conf" ] && bind_file "$HOME/.config/pip/pip.conf" /root/.config/pip/pip.conf
[ -n "${PIP_CONFIG_FILE:-}" ] && [ -f "$PIP_CONFIG_FILE" ] && bind_file "$PIP_CONFIG_FILE" /etc/pip.conf
# The CA bundle pip's configuration names (a proxy's CA may be in it) goes to a path of
# its own, named by PIP_CERT: the chroot's ca-certificates package owns its usual path.
pip_cert=""
ca=$(cat /etc/pip.conf "$HOME/.config/pip/pip.conf" 2>/dev/null | sed -n 's/^ *cert *= *//p' | tail -n 1)
if [ -n "$ca" ] && [ -f "$ca" ]; then
	bind_file "$ca" /usr/local/share/neuron-ci/pip-ca.crt
	pip_cert=PIP_CERT=/usr/local/share/neuron-ci/pip-ca.crt
fi

say "running '$COMMAND' in the chroot (log: $WORK/run.log)"
t0=$(date +%s)
R=$WORK/root BASE=$base/rootfs W=$WORK CC_DIR=$CI_CACHE/ccache-chroot APT_DIR=$CI_CACHE/apt-archives-chroot \
	timeout -k 10 "$TIMEOUT" unshare -m --propagation private bash -c "
	set -e
	mount -t overlay overlay -o lowerdir=\$BASE,upperdir=\$W/upper,workdir=\$W/ovwork \$R
	mount -t proc proc \$R/proc
	mount --rbind /sys \$R/sys
	mount --rbind /dev \$R/dev
	mount -t tmpfs tmpfs \$R/tmp
	cp /etc/resolv.conf \$R/etc/resolv.conf
	mkdir -p \$R/var/cache/ccache && mount --bind \$CC_DIR \$R/var/cache/ccache
	mount --bind \$APT_DIR \$R/var/cache/apt/archives
	$binds
	mkdir -p \$R/root/neuron && tar -x -C \$R/root/neuron -f \$W/tree.tar
	rc=0
	chroot \$R /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
		PATH=/usr/lib/ccache:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		CCACHE_DIR=/var/cache/ccache $pip_cert \
		/bin/bash -c 'cd /root/neuron && $COMMAND' || rc=\$?
	# What the run left in the system Python and the environment, for the checks below.
	chroot \$R /usr/bin/python3 -c 'import mesonbuild' >/dev/null 2>&1 && echo 'system-python: has meson' >\$W/after.txt || echo 'system-python: clean' >\$W/after.txt
	chroot \$R /root/neuron/.venv/bin/python -c 'import torch; print(\"venv-torch:\", torch.__version__)' >>\$W/after.txt 2>/dev/null || true
	exit \$rc
" >"$WORK/run.log" 2>&1
rc=$?
say "'$COMMAND' exited with $rc after $(($(date +%s) - t0))s"
tail -n 25 "$WORK/run.log" | sed 's/^/   | /'
if [ $rc -eq 0 ]; then
	pass "readme_command_runs_to_the_end"
else
	fail "readme_command_runs_to_the_end" "exit $rc; log: $WORK/run.log"
fi
grep -q 'system-python: clean' "$WORK/after.txt" 2>/dev/null && pass system_python_untouched ||
	fail system_python_untouched "$(cat "$WORK/after.txt" 2>/dev/null)"
grep -qE 'venv-torch: 2\.13\.0\+cpu$' "$WORK/after.txt" 2>/dev/null && pass venv_torch_is_cpu_build ||
	fail venv_torch_is_cpu_build "$(grep venv-torch "$WORK/after.txt" 2>/dev/null || echo 'no torch in /root/neuron/.venv')"
finish

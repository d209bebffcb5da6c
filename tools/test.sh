#!/usr/bin/env bash
# The README's second command: installs what the tests need, builds, and runs every
# test suite of the stack, then prints one summary line "N passed, N failed".
#
#   tools/test.sh            everything
#   FUZZ_SECONDS=N           time per fuzz target (default 30)
#   SKIP_DRIVER=1            skip the QEMU driver suite (it needs ~1-3 minutes)
#   SKIP_INSTALL=1           skip the install test (tests/install/run-install-test.sh: the
#                            Debian packages on a booted Debian 12 image; image and
#                            packages cached by content hash)
#   NEURON_TEST_BUDGET_MIN=N the run's time budget (default 85: CI stops a run at 90); the
#                            install test, which comes last, is skipped with a reason in
#                            the summary when what it still has to build would not fit
#                            (0: no budget)
#   NEURON_CHROOT_DEMO=1     also run the README's demo command in a stock Debian 12 chroot
#                            (tests/install/chroot-demo.sh; not by default: ~16 minutes warm)
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
run_start=$(date +%s)
jobs=$(nproc)
fuzz_seconds=${FUZZ_SECONDS:-30}
total_pass=0
total_fail=0
summary=()

step() { printf '\n==> %s\n' "$*"; }
record() { # name passed failed
	total_pass=$((total_pass + $2))
	total_fail=$((total_fail + $3))
	summary+=("$(printf '%-28s %5d passed %5d failed' "$1" "$2" "$3")")
}

# Sums Criterion's "Synthesis" lines (tests, not suites) from a meson test log.
criterion_counts() { # logfile -> "passed failed"
	awk '/Synthesis: Tested:/ {
		for (i = 1; i <= NF; i++) {
			if ($i == "Passing:") p += $(i + 1)
			if ($i == "Failing:") f += $(i + 1)
			if ($i == "Crashing:") f += $(i + 1)
		}
	} END { print p + 0, f + 0 }' "$1"
}

# Runs `meson test` in a build dir and records its Criterion counts; a suite that
# fails without printing a synthesis (a crash, a timeout) still counts as a failure.
run_meson_tests() { # label builddir [meson test args...]
	local label=$1 dir=$2
	shift 2
	meson test -C "$dir" --no-rebuild --print-errorlogs "$@" >"$dir/test-output.txt" 2>&1
	local rc=$?
	grep -E '^ *[0-9]+/[0-9]+ ' "$dir/test-output.txt" | sed 's/^/   /'
	read -r p f < <(criterion_counts "$dir/meson-logs/testlog.txt")
	local suites_failed
	suites_failed=$(grep -cE '^ *[0-9]+/[0-9]+ .* (FAIL|TIMEOUT|ERROR) ' "$dir/test-output.txt")
	if [[ $rc -ne 0 && $f -eq 0 ]]; then
		f=$((suites_failed > 0 ? suites_failed : 1))
		tail -n 40 "$dir/test-output.txt"
	fi
	record "$label" "$p" "$f"
}

step "Installing dependencies (Debian packages; Meson, pytest and PyTorch's CPU build from PyPI into .venv) if missing"
bash tools/setup/install-deps.sh --test || { echo "dependency installation failed"; exit 1; }
. tools/setup/use-venv.sh --torch || { echo "the Python environment (.venv) could not be set up"; exit 1; }

# The install test's host image (cached by its recipe's hash): when it is missing it
# takes ~10 minutes, mostly downloading and unpacking .debs, so it is built in the
# background while the stack compiles, and the install test waits for it at the end.
image_job=""
if [[ "${SKIP_INSTALL:-0}" != 1 ]]; then
	mkdir -p build-install
	bash tests/install/host-image.sh >build-install/host-image.log 2>&1 &
	image_job=$!
fi

step "Building (build/)"
[[ -f build/build.ninja ]] || meson setup build >/dev/null || exit 1
if ! ninja -C build -j"$jobs" >build/ninja-output.txt 2>&1; then
	tail -n 60 build/ninja-output.txt
	echo "0 passed, 1 failed"
	exit 1
fi

step "Unit and integration suites (Criterion, through meson test)"
run_meson_tests "criterion" build

step "The daemon and tiling suites again under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/)"
[[ -f build-asan/build.ninja ]] ||
	meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debugoptimized >/dev/null
# Only neurond, libneuron, the daemon suites and sharing-tiling: they are where
# threads, sockets and shared memory meet (sharing-tiling runs tiles of one command on
# 3 threads with parked chains, shared packs and f32 partials), and building the rest
# twice would double CI time. And the short soak (soak-short: 64 tenant processes with
# SIGKILLs and loans on an ASan neurond; it found a heap overflow the suites did not).
# And the tile engines' suite (10 s): UBSan found f32 tiles at unaligned SBUF bytes
# read in place there.
asan_pick='lambda t: t["name"].startswith("daemon-") or t["name"] in ("sharing-tiling", "soak-short", "tile")'
mapfile -t asan_tests < <(meson introspect build-asan --tests |
	python3 -c "import json, sys; [print(t['name']) for t in json.load(sys.stdin) if ($asan_pick)(t)]")
mapfile -t asan_targets < <(meson introspect build-asan --tests |
	python3 -c "import json, os, sys; [print(os.path.relpath(t['cmd'][0], sys.argv[1])) for t in json.load(sys.stdin) if ($asan_pick)(t)]" "$PWD/build-asan")
if ninja -C build-asan -j"$jobs" daemon/neurond tests/bench/bench-soak "${asan_targets[@]}" >build-asan/ninja-output.txt 2>&1; then
	# The daemon and its tenants run as separate processes: each reports its own
	# sanitizer errors and exits non-zero, which fails the test that started it.
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		run_meson_tests "daemon + tiling suites (asan+ubsan)" build-asan --timeout-multiplier 3 "${asan_tests[@]}"
else
	tail -n 60 build-asan/ninja-output.txt
	record "asan build" 0 1
fi

step "Fuzzing the control-message decoder, command validation, program validation and tile programs (${fuzz_seconds}s each, build-fuzz/)"
if [[ ! -f build-fuzz/build.ninja ]]; then
	CC=clang CXX=clang++ meson setup build-fuzz -Dfuzzers=true -Dtests=disabled \
		-Db_sanitize=address,undefined -Db_lundef=false -Dcpp_args=-fsanitize=fuzzer-no-link >/dev/null
fi
if ninja -C build-fuzz -j"$jobs" tests/fuzz/fuzz-control tests/fuzz/fuzz-command tests/fuzz/fuzz-command-seeds \
	tests/fuzz/fuzz-tile tests/fuzz/fuzz-tile-seeds tests/fuzz/fuzz-program >build-fuzz/ninja-output.txt 2>&1; then
	for target in fuzz-control fuzz-command fuzz-program fuzz-tile; do
		corpus=build-fuzz/corpus-$target
		mkdir -p "$corpus"
		max_len=1100 # a ring slot, a control frame
		[[ $target == fuzz-command ]] && build-fuzz/tests/fuzz/fuzz-command-seeds "$corpus"
		if [[ $target == fuzz-program ]]; then
			# Programs torch.compile registered (tests/fuzz/capture_program_seeds.py).
			cp tests/fuzz/program_seeds/*.pb "$corpus"/
			max_len=65536
		fi
		# A tile program: its header, arguments and a dozen instructions.
		[[ $target == fuzz-tile ]] && build-fuzz/tests/fuzz/fuzz-tile-seeds "$corpus" && max_len=12000
		if build-fuzz/tests/fuzz/$target -max_total_time="$fuzz_seconds" -timeout=10 -max_len="$max_len" \
			-rss_limit_mb=4096 -print_final_stats=1 "$corpus" >build-fuzz/$target.log 2>&1; then
			echo "   $target: $(grep -E '^Done' build-fuzz/$target.log) — no crash"
			record "$target" 1 0
		else
			tail -n 40 build-fuzz/$target.log
			record "$target" 0 1
		fi
	done
else
	tail -n 40 build-fuzz/ninja-output.txt
	record "fuzz build" 0 1
fi

# Runs a suite script whose last line is "N passed, N failed" and records its counts;
# a non-zero exit without failures counted, or no such line, counts as one failure.
run_counted_suite() { # label logfile lines-to-show command...
	local label=$1 log=$2 lines=$3
	shift 3
	"$@" 2>&1 | tee "$log" | tail -n "$lines"
	local rc=${PIPESTATUS[0]} line f
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
	if [[ -z "$line" ]]; then
		record "$label" 0 1
		return
	fi
	f=$(cut -d' ' -f3 <<<"$line")
	[[ $rc -ne 0 && $f -eq 0 ]] && f=1
	record "$label" "$(cut -d' ' -f1 <<<"$line")" "$f"
}

if [[ "${SKIP_DRIVER:-0}" != 1 && -f tests/driver/run-qemu-suite.sh ]]; then
	step "Kernel driver: host checks, then the QEMU suite on Debian's 6.12 kernel"
	run_counted_suite "driver (qemu)" build/driver-suite.txt 25 bash tests/driver/run-qemu-suite.sh
fi

if [[ "${NEURON_CHROOT_DEMO:-0}" == 1 ]]; then
	step "The README's demo command in a stock Debian 12 root filesystem (chroot)"
	run_counted_suite "demo (stock debian chroot)" build/chroot-demo.txt 30 bash tests/install/chroot-demo.sh
fi

for extra in tests/*/run.sh; do
	[[ -f "$extra" ]] || continue
	name=$(basename "$(dirname "$extra")")
	step "Suite tests/$name"
	bash "$extra" 2>&1 | tee "build/$name-suite.txt" | tail -n 30
	rc=${PIPESTATUS[0]}
	# pytest's closing line, e.g. "== 41 passed, 2 skipped in 80.1s ==".
	p=$(grep -oE '[0-9]+ passed' "build/$name-suite.txt" | tail -n 1 | cut -d' ' -f1)
	f=$(grep -oE '[0-9]+ (failed|error)' "build/$name-suite.txt" | awk '{s += $1} END {print s + 0}')
	p=${p:-0}
	[[ $rc -ne 0 && $f -eq 0 ]] && f=1
	record "$name" "$p" "$f"
done

if [[ -n "$image_job" ]]; then
	step "Install test: the Debian packages on a booted Debian 12 host (QEMU), cached image and packages"
	wait "$image_job" || { tail -n 30 build-install/host-image.log; }
	# What it still has to do, in minutes on a 2-core host (README): the guest ~25-30,
	# this tree's packages 0-35 (run-install-test.sh --packages-minutes); the image is
	# done by now (or failed, which the test reports).
	guest=30
	packages=$(bash tests/install/run-install-test.sh --packages-minutes)
	used=$((($(date +%s) - run_start) / 60))
	budget=${NEURON_TEST_BUDGET_MIN:-85}
	if ((budget <= 0 || used + packages + guest <= budget)); then
		run_counted_suite "install (qemu)" build/install-test.txt 80 bash tests/install/run-install-test.sh
	elif ((packages > 0 && used + packages + 10 <= budget)); then
		# No room for the guest: build and check the packages, which warms the
		# compiler cache so that the next run's whole install test fits (10 minutes
		# to spare: a cold package build's time varies most).
		echo "   the guest is skipped: ~$((packages + guest)) minutes needed, $used of this run's $budget used"
		run_counted_suite "install (packages only)" build/install-test.txt 30 bash tests/install/run-install-test.sh --packages-only
		summary+=("$(printf '%-28s skipped: ~%d min needed, %d of %d used' "install (qemu guest)" "$guest" "$used" "$budget")")
	else
		echo "   skipped: ~$((packages + guest)) minutes needed, $used of this run's $budget used (a cold cache)"
		summary+=("$(printf '%-28s skipped: ~%d min needed, %d of %d used' "install (qemu)" "$((packages + guest))" "$used" "$budget")")
	fi
fi

step "Summary"
printf '   %s\n' "${summary[@]}"
echo
echo "$total_pass passed, $total_fail failed"
[[ $total_fail -eq 0 ]]

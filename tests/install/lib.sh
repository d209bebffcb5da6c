# Sourced by the install tests (tests/install/*.sh): the cache directory, content
# hashes, messages.
#
# Caches live outside the clone, keyed by content hashes, so a fresh CI clone
# reuses them: NEURON_CI_CACHE (default /var/cache/neuron-ci).
#   images/<name>-<hash>/      root filesystems and disk images (host-image.sh, chroot-demo.sh)
#   packages/<hash>/           built .debs and the wheel (packaging/build-packages.sh)
#   ccache/                    compiler cache of the package build and the chroot demo

INSTALL_TESTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$INSTALL_TESTS/../.." && pwd)
CI_CACHE=${NEURON_CI_CACHE:-/var/cache/neuron-ci}
DEBIAN_MIRROR=${NEURON_DEBIAN_MIRROR:-http://deb.debian.org/debian}

# Messages go to stderr: a script's stdout is its result (host-image.sh prints the
# image directory, which its caller captures).
say() { echo "[${SUITE:-install}] $*" >&2; }
die() { echo "[${SUITE:-install}] error: $*" >&2; exit 1; }

# sha256 over the names and contents of the given files (sorted), e.g. a recipe
# and the scripts it copies into an image.
files_hash() {
	local f
	for f in $(printf '%s\n' "$@" | sort); do
		printf '%s\0' "${f#"$REPO_ROOT"/}"
		sha256sum <"$f"
	done | sha256sum | cut -c1-16
}

# sha256 over every file git tracks under the given paths, as they are in the work
# tree (uncommitted edits count), minus the excluded pathspecs.
tree_hash() { # pathspec... (git syntax, e.g. . ':!tests')
	(cd "$REPO_ROOT" && git ls-files -z --cached --others --exclude-standard -- "$@" | sort -z |
		xargs -0 -I{} sh -c 'printf "%s\0" "{}"; [ -e "{}" ] && sha256sum <"{}" || echo deleted') |
		sha256sum | cut -c1-16
}

# Installs Debian packages that are missing (idempotent; says what it installs).
need_debs() {
	local missing=() p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	say "installing Debian packages: ${missing[*]}"
	apt-get update -qq || say "apt-get update reported errors (continuing with the lists it has)"
	DEBIAN_FRONTEND=noninteractive apt-get install -o DPkg::Lock::Timeout=600 -y -q --no-install-recommends "${missing[@]}" >/tmp/neuron-install-apt.log 2>&1 ||
		{ tail -20 /tmp/neuron-install-apt.log; die "apt-get install ${missing[*]} failed"; }
}

# A cache entry is complete once its directory has a "complete" stamp; a half-built
# one (an interrupted run) is removed and rebuilt.
cache_ready() { [ -f "$1/complete" ]; }
cache_begin() { rm -rf "$1"; mkdir -p "$1"; }
cache_done() { date -u +%FT%TZ >"$1/complete"; }

# Keeps the newest N entries of a cache family (dir prefix), removes older ones.
cache_prune() { # prefix keep
	ls -1dt "$1"* 2>/dev/null | tail -n +"$(($2 + 1))" | xargs -r rm -rf
}

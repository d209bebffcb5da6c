# Sourced by the scripts that need Debian 12's bookworm-backports suite (the 6.12
# kernel and headers of the driver suite, meson >= 1.1 for the packages). One place
# writes the apt source, so both add the same file with the same keyring.
#   ensure_bookworm_backports   -> 0 if it was already there, 1 if it was added now
#                                  (the caller then runs apt-get update its own way)
ensure_bookworm_backports() {
	if grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
		return 0
	fi
	echo "adding bookworm-backports: /etc/apt/sources.list.d/bookworm-backports.sources" >&2
	cat >/etc/apt/sources.list.d/bookworm-backports.sources <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
	return 1
}

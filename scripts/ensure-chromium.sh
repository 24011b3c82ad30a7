#!/usr/bin/env bash
# ensure-chromium.sh leaves a Chromium that the browser tests (console/browsertest) can
# start: Debian's chromium package, installed with apt-get when no chromium is on the
# PATH. `make browser` and `make test` run it; CI runs it on a fresh Debian machine.
#
# It is idempotent and quiet: it prints nothing when a browser is there already, and
# needs root only to install one. Environment:
#   AX_CHROMIUM  a browser binary to use instead (checked, never installed)
set -euo pipefail

log() { echo "ensure-chromium: $*" >&2; }
die() {
	log "$*"
	exit 1
}

if [ -n "${AX_CHROMIUM:-}" ]; then
	[ -x "$AX_CHROMIUM" ] || command -v "$AX_CHROMIUM" >/dev/null || die "AX_CHROMIUM=$AX_CHROMIUM is not an executable"
	exit 0
fi

if command -v chromium >/dev/null; then
	exit 0
fi

[ "$(id -u)" = 0 ] || die "no chromium on the PATH and installing one needs root; run: sudo bash $0"
command -v apt-get >/dev/null || die "no chromium on the PATH and no apt-get to install it; install Chromium and set AX_CHROMIUM"

# retry runs a command up to 3 times, for apt's network hiccups.
retry() {
	local i
	for i in 1 2 3; do
		"$@" && return 0
		log "attempt $i of: $* failed"
		sleep $((i * 5))
	done
	return 1
}

log "installing chromium with apt-get"
export DEBIAN_FRONTEND=noninteractive
retry apt-get update -qq || die "apt-get update failed"
retry apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1 ||
	die "apt-get install chromium failed"
command -v chromium >/dev/null || die "the chromium package is installed but no chromium is on the PATH"
log "installed $(chromium --version 2>/dev/null || echo chromium)"

#!/usr/bin/env bash
# modcheck.sh checks the repository's modules the way they are published: each on its own
# (GOWORK=off), with no replace, resolving github.com/axsched/ax and its sub-modules through a
# local file proxy that scripts/modproxy writes from the git tags and the working tree.
# `make tidy-check` and `make consumer-check` run it.
#
#   modcheck.sh tidy MODDIR...      go mod tidy in each module (and in scripts/modproxy), then
#                                   fail when a go.mod or go.sum changed
#   modcheck.sh consumer MODDIR...  for each sub-module: fail when its go.mod holds a replace;
#                                   build and vet a copy of it outside the repository; then
#                                   build a new module that runs `go get` of each library
#                                   sub-module, as a user does
#
# The proxy serves each module's release tags from the tagged commit, and the working tree as
# the module's next version (v0.1.0 before the first tag): see scripts/modproxy. A require of
# any other version is looked up in the real GOPROXY, where it is missing, and the check fails.
#
# go.sum and github.com/axsched/ax: a checksum of the working tree served as v0.1.0 changes
# with every commit, so the sub-modules' go.sum files hold no line for github.com/axsched/ax
# or its sub-modules. The tidy check drops those lines before it compares, and the consumer
# check lets the go command add them to its copies (-mod=mod, GONOSUMDB).
#
# Everything it writes lives in AX_MODCHECK_DIR (default: a directory per work tree under
# ${XDG_CACHE_HOME:-~/.cache}/ax-modcheck): the proxy, a module cache of its own (so that a
# working tree served as a release never enters the user's module cache), and the copies.
# Third-party modules come from the user's module cache first, then from the real GOPROXY.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

AX=github.com/axsched/ax
DIR=${AX_MODCHECK_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ax-modcheck/$(printf %s "$ROOT" | sha256sum | cut -c1-12)}
PROXY=$DIR/proxy
MODCACHE=$DIR/modcache

usage() {
	echo "usage: $0 tidy|consumer MODDIR..." >&2
	exit 2
}

# build_proxy writes the file proxy for the root module and every module named.
build_proxy() {
	mkdir -p "$DIR/bin"
	(cd scripts/modproxy && GOWORK=off go build -o "$DIR/bin/modproxy" .)
	local dirs=(.) d
	for d in "$@"; do [ "$d" = . ] || dirs+=("$d"); done
	"$DIR/bin/modproxy" -out "$PROXY" -repo "$ROOT" "${dirs[@]}"
	# The working tree is served under release versions: forget what the last run extracted.
	if [ -d "$MODCACHE" ]; then
		chmod -R u+w "$MODCACHE/github.com/axsched" "$MODCACHE/cache/download/github.com/axsched" 2>/dev/null || true
		rm -rf "$MODCACHE/github.com/axsched" "$MODCACHE/cache/download/github.com/axsched"
	fi
}

# modgo runs go as outside the repository: no workspace, the file proxy first, no checksum
# database for ax, and a module cache of its own. -trimpath keeps directories out of the
# build cache's keys, so packages compiled once are reused whatever the module cache's or
# the copies' paths are (another clone, another work tree). goindex=0 turns off the go
# command's index of module cache directories, which is keyed by directory alone: ax@v0.1.0
# is extracted anew at the same path on every run, with other files.
modgo() {
	GOWORK=off \
		GODEBUG="${GODEBUG:+$GODEBUG,}goindex=0" \
		GOMODCACHE="$MODCACHE" \
		GOPROXY="file://$PROXY,file://$(go env GOMODCACHE)/cache/download,$(go env GOPROXY)" \
		GOPRIVATE= GONOPROXY= GONOSUMDB="$AX" \
		GOFLAGS="$(go env GOFLAGS) -modcacherw -trimpath ${MODGO_FLAGS:-}" \
		go "$@"
}

# strip_ax_sums drops the lines of github.com/axsched/ax and its sub-modules from go.sum in
# the current directory.
strip_ax_sums() {
	[ -f go.sum ] || return 0
	grep -Ev "^github\.com/axsched/ax(/[^ ]+)? " go.sum >go.sum.tmp || true
	mv go.sum.tmp go.sum
}

tidy() {
	build_proxy "$@"
	local m failed=0
	for m in "$@" scripts/modproxy; do
		echo "== tidy $m"
		(cd "$m" && strip_ax_sums && modgo mod tidy && strip_ax_sums)
		if ! git diff --exit-code -- "$m/go.mod" "$m/go.sum"; then
			echo "tidy-check: $m: go mod tidy changed go.mod or go.sum (see above); commit the result" >&2
			failed=1
		fi
	done
	return "$failed"
}

consumer() {
	build_proxy "$@"
	local m dst libs=()
	for m in "$@"; do
		[ "$m" = . ] && continue
		echo "== consumer $m"
		if [ "$(go mod edit -json "$m/go.mod" | grep -c '"Old":')" != 0 ]; then
			echo "consumer-check: $m/go.mod holds a replace; a published go.mod must not (go.work ties the modules together)" >&2
			return 1
		fi
		# Outside the repository: no go.work above it, and a replace to ../ would find nothing.
		dst=$DIR/consumer/$m
		rm -rf "$dst"
		mkdir -p "$dst"
		cp -a "$m/." "$dst/"
		if ! (cd "$dst" && strip_ax_sums && MODGO_FLAGS=-mod=mod modgo build ./... && MODGO_FLAGS=-mod=mod modgo vet ./...); then
			echo "consumer-check: $m does not build on its own (above). Does each require of $AX name a version the proxy serves that holds what $m uses? (docs/development.md, \"Releases\")" >&2
			return 1
		fi
		if ! cmp -s "$m/go.mod" "$dst/go.mod"; then
			diff -u "$m/go.mod" "$dst/go.mod" >&2 || true
			echo "consumer-check: building $m on its own changed its go.mod (above): a require is missing or too old" >&2
			return 1
		fi
		# A module whose root package is a command is installed, not imported.
		grep -qx 'package main' "$m"/*.go || libs+=("$(awk '$1 == "module" { print $2; exit }' "$m/go.mod")")
	done
	[ ${#libs[@]} -gt 0 ] || return 0
	echo "== consumer: a new module runs go get ${libs[*]}"
	dst=$DIR/consumer/app
	rm -rf "$dst"
	mkdir -p "$dst"
	{
		echo "// Command app imports the library modules, as a user's program does."
		echo "package main"
		echo
		echo "import ("
		for m in "${libs[@]}"; do echo "	_ \"$m\""; done
		echo ")"
		echo
		echo "func main() {}"
	} >"$dst/main.go"
	(cd "$dst" && modgo mod init example.com/app 2>/dev/null && modgo get "${libs[@]/%/@latest}" && modgo build ./... && modgo vet ./...)
}

[ $# -ge 1 ] || usage
cmd=$1
shift
case $cmd in
tidy) tidy "$@" ;;
consumer) consumer "$@" ;;
*) usage ;;
esac

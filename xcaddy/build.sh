#!/usr/bin/env bash
# Builds ./caddy (Caddy v2.11.9 with the kvroute plugin from this checkout) with xcaddy v0.4.5.
#
# xcaddy builds with cgo off unless CGO_ENABLED=1 is exported (kvroute's media decoding uses
# cgo), and the project is on Go 1.27.3, so both are exported here.
#
# Why not the plain `--with github.com/kvroute/kvroute=.`: xcaddy v0.4.5 then runs
# `go get github.com/kvroute/kvroute` with no version, and the go command asks the module proxy
# for the module's versions even though a replace directive points at this checkout; the module
# is not published and the proxy answers 403 (not 404), so the go command stops. Naming the
# version the go command gives replaced modules (v0.0.0-00010101000000-000000000000) makes it
# resolve the module through the replace with no proxy lookup. (`--with mod@ver=.` would say the
# same in one flag, but xcaddy v0.4.5 mis-parses that form, so the replace is its own flag.)
# This checkout's go.mod pins every other dependency.
#
# Usage: xcaddy/build.sh [output path]   (default: ./caddy in the repository root)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export GOTOOLCHAIN=go1.27.3
export CGO_ENABLED=1
# xcaddy runs its own `go` commands in a temporary module; a GOFLAGS of -mod=... from the caller
# (the Makefile sets -mod=mod) is fine there, but -mod=vendor would not be.
out="${1:-$root/caddy}"
with=()
case "${KVROUTE_FFMPEG:-static}" in
static)
	# kvroute's pinned static FFmpeg (the default, docs/ffmpeg.md): built once into a cache folder
	# (or the user's own with KVROUTE_FFMPEG_PREFIX), found by pkg-config. go.mod pins go-astiav
	# v0.39.0 for it; KVROUTE_FFMPEG_PIN=8.1 pairs deps/ffmpeg/pin-8.1.env with go.static-8.1.mod,
	# whose go-astiav version xcaddy's temporary module gets as a --with.
	nice ./deps/ffmpeg/build.sh
	PKG_CONFIG_PATH="$(./deps/ffmpeg/build.sh --print-prefix)/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
	export PKG_CONFIG_PATH
	# The build cache keys cgo packages on CGO_CPPFLAGS, not on PKG_CONFIG_PATH (Makefile, docs/ffmpeg.md).
	CGO_CPPFLAGS="-I$(./deps/ffmpeg/build.sh --print-prefix)/include${CGO_CPPFLAGS:+ $CGO_CPPFLAGS}"
	export CGO_CPPFLAGS
	if [ -n "${KVROUTE_FFMPEG_PIN:-}" ]; then
		astiav=$(awk '$1 == "github.com/asticode/go-astiav" {print $2}' "go.static-$KVROUTE_FFMPEG_PIN.mod")
		with=(--with "github.com/asticode/go-astiav@$astiav")
	fi
	# xcaddy's temporary module has its own go.mod: a caller's -modfile (the Makefile's) must not reach it.
	GOFLAGS=$(echo " ${GOFLAGS:-} " | sed -E 's/ -modfile=[^ ]+ / /')
	export GOFLAGS
	;;
*)
	# FFMPEG=system (go.system.mod, go-astiav v0.16.0 over Debian 12's FFmpeg 5.1) is for the
	# side-by-side decode benchmarks (make FFMPEG=system bins / go test); xcaddy's module takes
	# kvroute's go.mod, whose go-astiav is v0.39.0, so Caddy is built with the static FFmpeg only.
	echo "build.sh: KVROUTE_FFMPEG=${KVROUTE_FFMPEG}: ./caddy links kvroute's static FFmpeg only (docs/ffmpeg.md)" >&2
	exit 1
	;;
esac
go run github.com/caddyserver/xcaddy/cmd/xcaddy@v0.4.5 build v2.11.9 \
	--output "$out" \
	--with github.com/kvroute/kvroute@v0.0.0-00010101000000-000000000000 \
	--replace github.com/kvroute/kvroute=. \
	"${with[@]}"
"$out" list-modules --packages 2>/dev/null | grep -E '^(kvroute|http\.handlers\.kvroute|http\.reverse_proxy\.(selection_policies|upstreams)\.kvroute|admin\.api\.kvroute)\b' >&2 || {
	echo "build.sh: kvroute modules missing from $out" >&2
	exit 1
}
# FFmpeg is inside the binary: no shared libav*/libsw* library may be loaded.
if command -v ldd >/dev/null && ldd "$out" 2>/dev/null | grep -E 'lib(av|sw|postproc)' >&2; then
	echo "build.sh: $out loads a shared FFmpeg library" >&2
	exit 1
fi
echo "built $out" >&2

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
go run github.com/caddyserver/xcaddy/cmd/xcaddy@v0.4.5 build v2.11.9 \
	--output "$out" \
	--with github.com/kvroute/kvroute@v0.0.0-00010101000000-000000000000 \
	--replace github.com/kvroute/kvroute=.
"$out" list-modules --packages 2>/dev/null | grep -E '^(kvroute|http\.handlers\.kvroute|http\.reverse_proxy\.(selection_policies|upstreams)\.kvroute|admin\.api\.kvroute)\b' >&2 || {
	echo "build.sh: kvroute modules missing from $out" >&2
	exit 1
}
echo "built $out" >&2

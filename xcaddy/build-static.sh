#!/usr/bin/env bash
# Builds a static ./caddy-static (Caddy with kvroute and the pinned static FFmpeg) for images and
# hosts without a matching glibc, and the CA bundle the Containerfile copies
# (docs/deploy-static.md).
#
# The binary is linked with `-extldflags -static` against glibc's static libraries (libc6-dev):
# nothing is loaded at run time. DNS and user lookups are Go's own (tags netgo, osusergo), so
# glibc's NSS plugins, which a static glibc binary would still try to dlopen, are never used.
#
# Usage: xcaddy/build-static.sh [output path]   (default: ./caddy-static in the repository root)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out="${1:-$root/caddy-static}"
export KVROUTE_FFMPEG=static
export XCADDY_GO_BUILD_FLAGS="-trimpath -tags netgo,osusergo -ldflags '-w -s -linkmode=external -extldflags=-static'"
./xcaddy/build.sh "$out"
if ! file "$out" 2>/dev/null | grep -q 'statically linked' && ldd "$out" >/dev/null 2>&1; then
	echo "build-static.sh: $out is not static:" >&2
	ldd "$out" >&2
	exit 1
fi
mkdir -p container
cp /etc/ssl/certs/ca-certificates.crt container/ca-certificates.crt
echo "built $out (static) and container/ca-certificates.crt" >&2

#!/usr/bin/env bash
# Builds the pinned, minimal FFmpeg kvroute links statically (DESIGN.md §6 "The media library",
# docs/ffmpeg.md), with the pinned dav1d (AV1 decoding, libavcodec's libdav1d decoder) linked into
# it, into a versioned cache folder outside the repository and prints nothing but errors; a folder
# that is complete already is reused (idempotent).
#
#   deps/ffmpeg/build.sh                 build (or reuse) and report the prefix on stderr
#   deps/ffmpeg/build.sh --print-prefix  print the prefix only (no build)
#
# KVROUTE_FFMPEG_PIN=<name> selects deps/ffmpeg/pin-<name>.env instead of pin.env (8.1: FFmpeg
# 8.1.2, docs/ffmpeg.md "Pins"); the Go builds then need the matching go.static-<name>.mod.
#
# KVROUTE_FFMPEG_PREFIX=<dir> replaces the whole build with an FFmpeg installed there (a user's
# modified FFmpeg, docs/ffmpeg.md "How a user relinks").
#
# The prefix is ${KVROUTE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kvroute}/ffmpeg-<version>-<hash>,
# the hash covering both sources (FFmpeg's and dav1d's), the configure line, the extra arguments and
# BUILD_REV. Point pkg-config at <prefix>/lib/pkgconfig: FFmpeg's static .pc files carry the
# transitive libraries (libdav1d.a included) in Libs.
#
# Source, in this order: $KVROUTE_FFMPEG_TARBALL (a local copy of the release tarball), the
# official release tarball, or Debian's source package of the same release through `apt-get
# source` with a deb-src entry derived from this system's apt sources (the first Debian archive
# URI found there, suite $FFMPEG_DEB_SUITE). Whatever the source, the tarball's sha256 must be
# the pinned one. dav1d the same way: $KVROUTE_DAV1D_TARBALL, VideoLAN's release tarball, or
# Debian's source package dav1d=$DAV1D_DEB_VERSION (suite $DAV1D_DEB_SUITE); its sha256 pinned too.
# dav1d builds with meson and ninja (Debian packages meson, ninja-build). KVROUTE_FFMPEG_EXTRA adds configure arguments (e.g. --disable-x86asm to measure
# what SIMD is worth); it changes the hash, so such a build gets its own folder.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
pin=$here/pin${KVROUTE_FFMPEG_PIN:+-$KVROUTE_FFMPEG_PIN}.env
[ -f "$pin" ] || { echo "ffmpeg build: no pin file $pin (KVROUTE_FFMPEG_PIN=${KVROUTE_FFMPEG_PIN:-})" >&2; exit 1; }
# shellcheck source=pin.env
source "$pin"
mapfile -t args < <(grep -v '^#' "$here/configure.args" | sed '/^$/d')
# shellcheck disable=SC2206
extra=(${KVROUTE_FFMPEG_EXTRA:-})
args+=("${extra[@]}")

# BUILD_REV: raise it when a change to this script changes what it installs.
BUILD_REV=2
hash=$(printf '%s\n' "$FFMPEG_VERSION" "$FFMPEG_SHA256" "$DAV1D_VERSION" "$DAV1D_SHA256" "$BUILD_REV" "${args[@]}" | sha256sum | cut -c1-12)
cache=${KVROUTE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kvroute}
prefix=$cache/ffmpeg-$FFMPEG_VERSION-$hash

# An FFmpeg of the user's own (relinking, LGPL): used as it is, nothing is built.
if [ -n "${KVROUTE_FFMPEG_PREFIX:-}" ]; then
	if [ "${1:-}" != --print-prefix ] && [ ! -f "$KVROUTE_FFMPEG_PREFIX/lib/pkgconfig/libavformat.pc" ]; then
		echo "ffmpeg build: KVROUTE_FFMPEG_PREFIX=$KVROUTE_FFMPEG_PREFIX has no lib/pkgconfig/libavformat.pc" >&2
		exit 1
	fi
	prefix=$KVROUTE_FFMPEG_PREFIX
	[ "${1:-}" = --print-prefix ] && echo "$prefix"
	exit 0
fi
if [ "${1:-}" = --print-prefix ]; then
	echo "$prefix"
	exit 0
fi
if [ -f "$prefix/.complete" ]; then
	exit 0
fi

for tool in cc make pkg-config sha256sum tar xz meson ninja; do
	command -v "$tool" >/dev/null || { echo "ffmpeg build: $tool is missing" >&2; exit 1; }
done
case "$(uname -m)" in
x86_64 | i?86)
	if ! printf '%s\n' "${args[@]}" | grep -qx -- --disable-x86asm && ! command -v nasm >/dev/null; then
		echo "ffmpeg build: nasm is missing (x86 SIMD; Debian package nasm)" >&2
		exit 1
	fi
	;;
esac

mkdir -p "$cache/src"

# debsrc_entry prints a deb822 deb-src stanza for suite $1 built from the first Debian archive
# URI of this system's apt sources (no mirror is named in the repository).
debsrc_entry() {
	local uri=""
	uri=$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -v security | head -n1 || true)
	if [ -z "$uri" ]; then
		uri=$(grep -hsE '^deb(-src)? ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
			sed -E 's/^deb(-src)? (\[[^]]*\] )?//' | awk '{print $1}' | grep -v security | head -n1 || true)
	fi
	[ -n "$uri" ] || return 1
	printf 'Types: deb-src\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' "$uri" "$1"
}

# fetch_debian PKG DEBVERSION SUITE ORIG OUT: the orig tarball ORIG of Debian's source package
# PKG=DEBVERSION (apt-get source with a private apt state; nothing under /etc/apt changes) to OUT.
fetch_debian() {
	command -v apt-get >/dev/null || return 1
	local apt=$cache/src/apt
	rm -rf "$apt" && mkdir -p "$apt/etc" "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/dl"
	debsrc_entry "$3" >"$apt/etc/kvroute-src.sources" || return 1
	local o=(-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$apt/etc"
		-o Dir::State::Lists="$apt/lists" -o Dir::Cache="$apt/cache" -o APT::Sandbox::User=root)
	apt-get "${o[@]}" -qq update >&2 || return 1
	(cd "$apt/dl" && apt-get "${o[@]}" -qq source --download-only "$1=$2" >&2) || return 1
	cp "$apt/dl/$4" "$5.part" && mv "$5.part" "$5"
}

# get NAME VERSION SHA256 LOCAL URL DEBPKG DEBVERSION SUITE ORIG: puts the sha256-checked release
# tarball of NAME at $cache/src/NAME-VERSION.tar.xz (from LOCAL, URL or Debian) and prints its path.
get() {
	local tarball=$cache/src/$1-$2.tar.xz sha=$3
	check() { [ -f "$tarball" ] && echo "$sha  $tarball" | sha256sum -c --status; }
	[ -z "$4" ] || cp "$4" "$tarball"
	if ! check; then
		rm -f "$tarball"
		if command -v curl >/dev/null &&
			curl -fsSL --connect-timeout 10 --max-time 300 -o "$tarball.part" "$5" 2>/dev/null; then
			mv "$tarball.part" "$tarball"
		else
			rm -f "$tarball.part"
			echo "ffmpeg build: the $1 release tarball is not reachable; using Debian's source package $6=$7 ($8)" >&2
			fetch_debian "$6" "$7" "$8" "$9" "$tarball" || { echo "ffmpeg build: no $1 source (set KVROUTE_${1^^}_TARBALL to a copy of $1-$2.tar.xz)" >&2; return 1; }
		fi
	fi
	check || { echo "ffmpeg build: $tarball does not have the pinned sha256 $3" >&2; return 1; }
	echo "$tarball"
}

tarball=$(get ffmpeg "$FFMPEG_VERSION" "$FFMPEG_SHA256" "${KVROUTE_FFMPEG_TARBALL:-}" \
	"https://ffmpeg.org/releases/ffmpeg-$FFMPEG_VERSION.tar.xz" \
	ffmpeg "$FFMPEG_DEB_VERSION" "$FFMPEG_DEB_SUITE" "ffmpeg_$FFMPEG_VERSION.orig.tar.xz")
dav1d_tarball=$(get dav1d "$DAV1D_VERSION" "$DAV1D_SHA256" "${KVROUTE_DAV1D_TARBALL:-}" \
	"https://downloads.videolan.org/pub/videolan/dav1d/$DAV1D_VERSION/dav1d-$DAV1D_VERSION.tar.xz" \
	dav1d "$DAV1D_DEB_VERSION" "$DAV1D_DEB_SUITE" "dav1d_$DAV1D_VERSION.orig.tar.xz")

build=$cache/src/build-$FFMPEG_VERSION-$hash
rm -rf "$build" "$prefix" && mkdir -p "$build/dav1d" "$build/ffmpeg"
start=$(date +%s)

# dav1d: static, x86 SIMD on (nasm), no tools/tests/examples; installed into the same prefix so
# FFmpeg's configure finds dav1d.pc there and libavcodec.pc lists -ldav1d.
echo "ffmpeg build: building dav1d $DAV1D_VERSION into $prefix" >&2
tar -xJf "$dav1d_tarball" -C "$build/dav1d" --strip-components=1
dav1d_args=(--prefix="$prefix" --libdir=lib --buildtype=release --default-library=static
	-Denable_tools=false -Denable_tests=false -Denable_examples=false -Denable_docs=false -Denable_asm=true)
(
	cd "$build/dav1d"
	{ meson setup out "${dav1d_args[@]}" && ninja -C out && ninja -C out install; } >"$build/dav1d.log" 2>&1 || { tail -n 30 "$build/dav1d.log" >&2; exit 1; }
)

echo "ffmpeg build: configuring FFmpeg $FFMPEG_VERSION into $prefix" >&2
tar -xJf "$tarball" -C "$build/ffmpeg" --strip-components=1
(
	cd "$build/ffmpeg"
	# --pkg-config-flags=--static: dav1d's Libs.private (-pthread, -ldl) go into libavcodec.pc's Libs.
	PKG_CONFIG_PATH="$prefix/lib/pkgconfig" ./configure --prefix="$prefix" --pkg-config-flags=--static "${args[@]}" >"$build/configure.log" 2>&1 || { tail -n 30 "$build/configure.log" >&2; exit 1; }
	make -j"$(nproc)" >"$build/make.log" 2>&1 || { tail -n 30 "$build/make.log" >&2; exit 1; }
	make install >>"$build/make.log" 2>&1
)
{
	printf 'meson setup %s\n' "${dav1d_args[*]}"
	printf '%s\n' "./configure --prefix=$prefix --pkg-config-flags=--static ${args[*]}"
} >"$prefix/configure.line"
{
	echo "$FFMPEG_SHA256  ffmpeg-$FFMPEG_VERSION.tar.xz"
	echo "$DAV1D_SHA256  dav1d-$DAV1D_VERSION.tar.xz"
} >"$prefix/source.sha256"
touch "$prefix/.complete"
rm -rf "$build"
echo "ffmpeg build: done in $(($(date +%s) - start)) s: $prefix" >&2

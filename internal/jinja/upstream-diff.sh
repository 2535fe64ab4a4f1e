#!/usr/bin/env bash
# upstream-diff.sh: our copy of github.com/ardanlabs/jinja against the pristine module release that
# UPSTREAM names, fetched through the Go module proxy (`go mod download`, so GOPROXY, GOSUMDB,
# GONOSUMDB and GOMODCACHE are respected and the zip is checked against sum.golang.org on its first
# download). Needs only the go command and the module proxy; run from anywhere (`make jinja-diff`).
#
#   upstream-diff.sh                          diff -u of every copied file (module's version on the
#                                             left, ours on the right), then a summary: changed
#                                             files, files ours adds, module files not copied
#   upstream-diff.sh --upstream-changes VER   what upstream changed from UPSTREAM's version to VER
#                                             in the copied files, and files VER adds or drops
#   upstream-diff.sh --merge VER              three-way merge of upstream's VER changes into our
#                                             copied files (git merge-file; conflicts are marked in
#                                             the files), then UPSTREAM's version, hashes, time and
#                                             commit are rewritten for VER (README.md, "Upgrading")
#
# Exit status: 0 when the listing is complete (differences are not an error), 1 when a download's
# h1 hash differs from UPSTREAM's, a listed file is missing, a file here is neither copied nor
# ours, or a merge left conflicts; 2 on usage errors.
set -euo pipefail
cd "$(dirname "$0")"
here=internal/jinja

field() { awk -v k="$1" '$1 == k { print $2; exit }' UPSTREAM; }
module=$(field module)
version=$(field version)
want_h1=$(field h1)
if [ -z "$module" ] || [ -z "$version" ] || [ -z "$want_h1" ]; then
	echo "upstream-diff: UPSTREAM lacks module, version or h1" >&2
	exit 1
fi
# copied: "module-path local-path" per line; ours: local paths.
copied=$(awk '$1 == "file" { print $2, $3 }' UPSTREAM)
ours=$(awk '$1 == "ours" { print $2 }' UPSTREAM)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# fetch VER: download module@VER; sets dir, sum, modsum, vtime, vhash (empty when the proxy gives
# no Origin). A temporary module keeps go.mod of this repository (and -modfile in GOFLAGS) out.
fetch() {
	local ver=$1 out
	mkdir -p "$tmp/mod"
	if [ ! -f "$tmp/mod/go.mod" ]; then
		(cd "$tmp/mod" && GOFLAGS= GOWORK=off go mod init jinjadiff.invalid >/dev/null 2>&1)
	fi
	if ! out=$(cd "$tmp/mod" && GOFLAGS= GOWORK=off go mod download -json "$module@$ver"); then
		echo "upstream-diff: go mod download $module@$ver failed:" >&2
		echo "$out" >&2
		exit 1
	fi
	json() { printf '%s\n' "$out" | sed -n "s/^[[:space:]]*\"$1\": \"\(.*\)\",\{0,1\}\$/\1/p" | head -n1; }
	dir=$(json Dir)
	zip=$(json Zip)
	sum=$(json Sum)
	modsum=$(json GoModSum)
	vhash=$(json Hash)
	vtime=$(sed -n 's/.*"Time": *"\([^"]*\)".*/\1/p' "$(json Info)" | head -n1)
	if [ -z "$dir" ] || [ ! -d "$dir" ] || [ -z "$sum" ]; then
		echo "upstream-diff: unexpected go mod download output:" >&2
		echo "$out" >&2
		exit 1
	fi
}

# rdiff LEFT RIGHT LEFTLABEL RIGHTLABEL: diff -u, 0 or 1 is fine.
rdiff() {
	local rc=0
	diff -u --label "$3" --label "$4" "$1" "$2" || rc=$?
	[ "$rc" -le 1 ] || exit 1
	return "$rc"
}

fetch "$version"
if [ "$sum" != "$want_h1" ]; then
	echo "upstream-diff: $module@$version has hash $sum, UPSTREAM records $want_h1" >&2
	exit 1
fi
base=$dir
want_zip=$(field zip-sha256)
if [ -n "$want_zip" ] && command -v sha256sum >/dev/null; then
	got_zip=$(sha256sum "$zip" | cut -d' ' -f1)
	if [ "$got_zip" != "$want_zip" ]; then
		echo "upstream-diff: $zip has sha256 $got_zip, UPSTREAM records $want_zip" >&2
		exit 1
	fi
fi

case "${1:-}" in
"")
	status=0
	changed=()
	while read -r src dst; do
		if [ ! -f "$base/$src" ]; then
			echo "upstream-diff: UPSTREAM lists $src, not in $module@$version" >&2
			status=1
			continue
		fi
		if [ ! -f "$dst" ]; then
			echo "upstream-diff: UPSTREAM lists $here/$dst, missing" >&2
			status=1
			continue
		fi
		if ! rdiff "$base/$src" "$dst" "$module@$version/$src" "$here/$dst"; then
			stat=$(diff "$base/$src" "$dst" | awk '/^>/ { a++ } /^</ { d++ } END { printf "+%d -%d", a, d }' || true)
			changed+=("$here/$dst ($stat)")
		fi
	done <<<"$copied"

	echo
	echo "== summary: $here against $module@$version ($want_h1)"
	echo "copied files: $(grep -c . <<<"$copied"), changed: ${#changed[@]}"
	for c in "${changed[@]}"; do echo "  changed  $c"; done
	echo "files ours adds (UPSTREAM 'ours'):"
	for f in $ours; do
		if [ -f "$f" ]; then
			echo "  ours     $here/$f ($(wc -l <"$f") lines)"
		else
			echo "  missing  $here/$f (listed as ours)"
			status=1
		fi
	done
	listed=$( (awk '{ print $2 }' <<<"$copied"; printf '%s\n' $ours) | LC_ALL=C sort)
	present=$(find . -type f ! -name '*~' | sed 's#^\./##' | LC_ALL=C sort)
	while read -r f; do
		[ -n "$f" ] || continue
		echo "  UNDOCUMENTED $here/$f (neither a 'file' nor an 'ours' line in UPSTREAM)"
		status=1
	done < <(LC_ALL=C comm -13 <(echo "$listed") <(echo "$present"))
	echo "module files not copied:"
	(cd "$base" && find . -type f | sed 's#^\./##' | LC_ALL=C sort) |
		LC_ALL=C comm -23 - <(awk '{ print $1 }' <<<"$copied" | LC_ALL=C sort) | sed 's/^/  not copied  /'
	exit "$status"
	;;
--upstream-changes | --merge)
	new=${2:-}
	if [ -z "$new" ]; then
		echo "usage: $0 $1 VERSION" >&2
		exit 2
	fi
	fetch "$new"
	echo "$module@$new: $sum (go.mod $modsum), time $vtime, commit ${vhash:-unknown (no Origin from the proxy)}" >&2
	status=0
	while read -r src dst; do
		if [ ! -f "$dir/$src" ]; then
			echo "removed upstream in $new: $src (ours: $here/$dst)"
			continue
		fi
		if [ "$1" = --upstream-changes ]; then
			rdiff "$base/$src" "$dir/$src" "$module@$version/$src" "$module@$new/$src" || true
		elif ! cmp -s "$base/$src" "$dir/$src"; then
			if ! git merge-file -L "$here/$dst" -L "$module@$version/$src" -L "$module@$new/$src" \
				"$dst" "$base/$src" "$dir/$src"; then
				echo "CONFLICT: $here/$dst (markers in the file)"
				status=1
			else
				echo "merged: $here/$dst"
			fi
		fi
	done <<<"$copied"
	echo "module files of $new not copied (new ones may be wanted, e.g. *_test.go, testdata/):"
	(cd "$dir" && find . -type f | sed 's#^\./##' | LC_ALL=C sort) |
		LC_ALL=C comm -23 - <(awk '{ print $1 }' <<<"$copied" | LC_ALL=C sort) | sed 's/^/  /'
	if [ "$1" = --merge ]; then
		awk -v v="$new" -v h="$sum" -v m="$modsum" -v z="$(sha256sum "$zip" | cut -d' ' -f1)" -v t="$vtime" -v c="${vhash:-unknown}" -v d="$(date -u +%F)" '
			$1 == "version" { $0 = "version " v }
			$1 == "h1" { $0 = "h1 " h }
			$1 == "gomod-h1" { $0 = "gomod-h1 " m }
			$1 == "zip-sha256" { $0 = "zip-sha256 " z }
			$1 == "time" { $0 = "time " t }
			$1 == "commit" { $0 = "commit " c }
			$1 == "date" { $0 = "date " d }
			{ print }' UPSTREAM >"$tmp/UPSTREAM"
		cat "$tmp/UPSTREAM" >UPSTREAM
		echo "UPSTREAM now records $new; check its comments, add new upstream files by hand" >&2
	fi
	exit "$status"
	;;
*)
	echo "usage: $0 [--upstream-changes VERSION | --merge VERSION]" >&2
	exit 2
	;;
esac

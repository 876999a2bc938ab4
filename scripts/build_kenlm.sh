#!/usr/bin/env bash
# Build KenLM's lmplz (n-gram LM estimation) and build_binary into DEST (udfs/ngram.py).
# No PyPI wheel ships these two programs (ufal-kenlm and kenlm hold only the query module),
# so we compile them from the kenlm sdist: cmake, a C++ compiler and Boost dev libraries.
set -euo pipefail
dest=${1:?usage: build_kenlm.sh DEST_BIN_DIR}
pip=${PIP:-.venv/bin/pip}

# Already built: nothing to do (make calls us whenever the target file is missing).
if [[ -x $dest/lmplz && -x $dest/build_binary ]]; then
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Each probe: "debian-package|check". Link probes find both the headers and the .so, on any
# distribution; the package name is what we install where apt-get is at hand.
cxx=$(command -v c++ || command -v g++ || true)
boost_probe() {  # $1 header, $2 library: compile and link a program that uses both
  [[ -n $cxx ]] && printf '#include <%s>\nint main() { return 0; }\n' "$1" |
    "$cxx" -x c++ - -o "$tmp/probe" "-l$2" >/dev/null 2>&1
}
header_probe() { [[ -n $cxx ]] && echo "#include <$1>" | "$cxx" -x c++ -E - >/dev/null 2>&1; }
missing() {  # prints the Debian packages still missing; $1=all also lists the optional ones
  command -v cmake >/dev/null || echo cmake
  command -v make >/dev/null || echo make
  [[ -n $cxx ]] || echo g++
  boost_probe boost/program_options.hpp boost_program_options || echo libboost-program-options-dev
  boost_probe boost/system/error_code.hpp boost_system || echo libboost-system-dev
  boost_probe boost/thread.hpp boost_thread || echo libboost-thread-dev
  # kenlm's CMakeLists asks for Boost.Test even when its tests are not built
  boost_probe boost/test/unit_test.hpp boost_unit_test_framework || echo libboost-test-dev
  if [[ ${1:-} == all ]]; then  # optional: lets lmplz read .gz/.bz2/.xz input
    header_probe zlib.h || echo zlib1g-dev
    header_probe bzlib.h || echo libbz2-dev
    header_probe lzma.h || echo liblzma-dev
  fi
}

need=$(missing all | tr '\n' ' ')
if [[ -n ${need// /} ]]; then
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    echo "build_kenlm: apt-get install $need"
    # A fresh image may have no package lists yet: update only when the install fails.
    export DEBIAN_FRONTEND=noninteractive
    # shellcheck disable=SC2086  # $need is a list of package names
    apt-get install -y -qq --no-install-recommends $need >/dev/null 2>&1 ||
      { apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends $need >/dev/null; }
    cxx=$(command -v c++ || command -v g++ || true)
  fi
  need=$(missing | tr '\n' ' ')
  if [[ -n ${need// /} ]]; then
    echo "build_kenlm: cannot build lmplz: missing ${need% } (Debian packages; install them as root)" >&2
    exit 1
  fi
fi

# The sdist is kenlm's full C++ tree (pinned: the same sources on every machine). pip still
# reads its metadata; --no-build-isolation does that with the venv's setuptools, no download.
"$pip" download -q --no-deps --no-binary :all: --no-build-isolation -d "$tmp" "kenlm==0.3.0"
tar -xzf "$tmp"/kenlm-*.tar.gz -C "$tmp"
src=$(echo "$tmp"/kenlm-*/)
# Only the two programs we use: the full tree (tests, query module, benchmarks) takes far longer.
if ! { cmake -S "$src" -B "$tmp/build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_RUNTIME_OUTPUT_DIRECTORY="$tmp/build/bin" &&
  cmake --build "$tmp/build" -j 2 --target lmplz build_binary; } >"$tmp/build.log" 2>&1; then
  tail -n 30 "$tmp/build.log" >&2
  echo "build_kenlm: build failed (log tail above)" >&2
  exit 1
fi
mkdir -p "$dest"
# Copy then rename, so an interrupted copy never looks like a finished build.
for exe in lmplz build_binary; do
  cp "$tmp/build/bin/$exe" "$dest/.$exe.tmp"
  mv "$dest/.$exe.tmp" "$dest/$exe"
done
echo "lmplz, build_binary -> $dest"

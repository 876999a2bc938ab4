#!/usr/bin/env bash
# Headless Chromium for tests/test_report.py, which opens the run report (jobs/report.py) in a
# real browser to see its charts draw. Only the test needs it; the report itself needs none.
# Installs Debian's `chromium` when it is missing (as root, where apt-get is at hand).
set -euo pipefail

if command -v chromium >/dev/null; then
  exit 0
fi
if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
  echo "install_chromium: apt-get install chromium"
  export DEBIAN_FRONTEND=noninteractive
  # A fresh image may have no package lists yet: update only when the install fails.
  apt-get install -y -qq chromium >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null && apt-get install -y -qq chromium >/dev/null; }
fi
if ! command -v chromium >/dev/null; then
  echo "install_chromium: no chromium (the Debian package 'chromium'; install it as root)" >&2
  exit 1
fi

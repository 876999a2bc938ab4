#!/usr/bin/env bash
# What PyICU (udfs/scripts.py, udfs/tokens.py) builds against: ICU's headers and pkg-config,
# Debian's `libicu-dev` and `pkg-config`. Installed when missing (as root, where apt-get is at
# hand), before `pip install` builds PyICU from its sdist (it ships no wheels).
set -euo pipefail

have() { command -v pkg-config >/dev/null && pkg-config --exists icu-uc icu-i18n; }
if have; then
  exit 0
fi
if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
  echo "install_icu: apt-get install libicu-dev pkg-config"
  export DEBIAN_FRONTEND=noninteractive
  # A fresh image may have no package lists yet: update only when the install fails.
  apt-get install -y -qq libicu-dev pkg-config >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null && apt-get install -y -qq libicu-dev pkg-config >/dev/null; }
fi
if ! have; then
  echo "install_icu: no ICU headers (Debian: libicu-dev and pkg-config; install them as root)" >&2
  exit 1
fi

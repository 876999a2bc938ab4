#!/usr/bin/env bash
# What a shared metastore (scripts/metastore.sh, lake.metastore) needs: PostgreSQL and its JDBC
# driver, Debian's `postgresql` and `libpostgresql-jdbc-java`. Installed when missing (as root,
# where apt-get is at hand); tests/test_shared_metastore.py runs the service with them.
set -euo pipefail

have() { ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 && [ -f /usr/share/java/postgresql.jar ]; }
if have; then
  exit 0
fi
if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
  echo "install_metastore_deps: apt-get install postgresql libpostgresql-jdbc-java"
  export DEBIAN_FRONTEND=noninteractive
  # A fresh image may have no package lists yet: update only when the install fails.
  apt-get install -y -qq postgresql libpostgresql-jdbc-java >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null &&
      apt-get install -y -qq postgresql libpostgresql-jdbc-java >/dev/null; }
fi
if ! have; then
  echo "install_metastore_deps: no PostgreSQL or no JDBC driver (Debian: postgresql," \
    "libpostgresql-jdbc-java; install them as root)" >&2
  exit 1
fi

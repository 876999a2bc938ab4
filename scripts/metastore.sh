#!/usr/bin/env bash
# A shared Hive metastore for a lake that many jobs and spark-sql shells use at once: the
# Thrift service from pyspark's own Hive jars, its catalog in PostgreSQL.
#
#   scripts/metastore.sh start|stop|status [DIR]
#
# DIR (default ./metastore, or $SLUICE_METASTORE_DIR) holds PostgreSQL's data, the service's
# log and pid, and the generated password (DIR/password, mode 600). PostgreSQL listens on
# 127.0.0.1 only; the Thrift service on every interface (Hive 2.3 has no bind-host setting):
# keep its port behind the host's firewall. Ports: $SLUICE_PG_PORT
# (55432) and $SLUICE_METASTORE_PORT (9083). Then point jobs at it:
#   --set lake.metastore=thrift://127.0.0.1:9083
# or at PostgreSQL itself (no service):
#   --set lake.metastore=jdbc:postgresql://127.0.0.1:55432/sluice
#   SLUICE_METASTORE_PASSWORD=$(cat DIR/password)
# Needs PostgreSQL (Debian: postgresql) and its JDBC driver (libpostgresql-jdbc-java); `make
# setup-metastore` installs both. PostgreSQL will not run as root: as root it runs as the
# postgres user, which then owns DIR/pg. A PostgreSQL that goes down is retried 3 times, 1 s
# apart, per call (Hive's default is 10 times 2 s): jobs then fail in seconds, in one line.
set -euo pipefail

cmd=${1:-status}
dir=$(realpath -m "${2:-${SLUICE_METASTORE_DIR:-./metastore}}")
pg_port=${SLUICE_PG_PORT:-55432}
hms_port=${SLUICE_METASTORE_PORT:-9083}
jdbc_jar=${SLUICE_JDBC_JAR:-/usr/share/java/postgresql.jar}
python=${PYTHON:-$(command -v python3)}
[ -x .venv/bin/python ] && python=.venv/bin/python
pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)

die() { echo "metastore: $*" >&2; exit 2; }
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
hms_pid() { [ -f "$dir/metastore.pid" ] && kill -0 "$(cat "$dir/metastore.pid")" 2>/dev/null \
  && cat "$dir/metastore.pid"; }

start_postgres() {
  [ -n "$pg_bin" ] || die "no PostgreSQL under /usr/lib/postgresql (apt-get install postgresql)"
  mkdir -p "$dir/sock"
  if [ ! -f "$dir/pg/PG_VERSION" ]; then
    umask 077
    head -c 18 /dev/urandom | base64 | tr -d '/+=' > "$dir/password"
    mkdir -p "$dir/pg"
    if [ "$(id -u)" = 0 ]; then
      chown postgres "$dir/pg" "$dir/sock" && chmod 755 "$dir"
      as_pg test -x "$dir" || die "$dir: the postgres user cannot reach it (a parent is private)"
    fi
    as_pg "$pg_bin/initdb" -D "$dir/pg" -U postgres --auth-local=trust \
      --auth-host=scram-sha-256 > "$dir/initdb.log"
    fresh=1
  fi
  as_pg "$pg_bin/pg_ctl" -D "$dir/pg" -l "$dir/sock/postgres.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $pg_port -k $dir/sock" start > /dev/null
  if [ "${fresh:-0}" = 1 ]; then
    as_pg "$pg_bin/psql" -q -h "$dir/sock" -p "$pg_port" -U postgres -d postgres \
      -c "CREATE ROLE sluice LOGIN PASSWORD '$(cat "$dir/password")'" \
      -c "CREATE DATABASE sluice OWNER sluice"
  fi
}

start_metastore() {
  # The service (scripts/metastore_service.sh) reads its password from a file and writes its
  # settings into DIR/conf (mode 700): the password stays out of `ps`.
  METASTORE_DB_URL="jdbc:postgresql://127.0.0.1:$pg_port/sluice" \
    METASTORE_DB_PASSWORD_FILE="$dir/password" METASTORE_PORT="$hms_port" \
    METASTORE_WAREHOUSE="file://$dir/warehouse" METASTORE_CONF_DIR="$dir/conf" \
    SLUICE_JDBC_JAR="$jdbc_jar" PYTHON="$python" \
    nohup "$(dirname "$0")/metastore_service.sh" > "$dir/metastore.log" 2>&1 &
  echo $! > "$dir/metastore.pid"
  for _ in $(seq 120); do
    port_open "$hms_port" && return 0
    kill -0 "$(cat "$dir/metastore.pid")" 2>/dev/null || die "the service exited: $dir/metastore.log"
    sleep 0.5
  done
  die "the service did not open port $hms_port in 60 s: $dir/metastore.log"
}

case "$cmd" in
  start)
    mkdir -p "$dir"
    port_open "$pg_port" || start_postgres  # also after PostgreSQL alone went down
    if hms_pid > /dev/null; then echo "metastore: already running (pid $(hms_pid))"; exit 0; fi
    start_metastore
    if [ ! -f "$dir/warmed" ]; then  # a new catalog: its tables made once, by one client
      "$python" scripts/metastore_warmup.py "thrift://127.0.0.1:$hms_port" "$dir" \
        > "$dir/warmup.log" 2>&1 || die "warm-up failed: $dir/warmup.log"
      touch "$dir/warmed"
    fi
    echo "metastore: thrift://127.0.0.1:$hms_port (PostgreSQL 127.0.0.1:$pg_port, $dir)"
    ;;
  stop)
    if pid=$(hms_pid); then kill "$pid"; while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done; fi
    rm -f "$dir/metastore.pid"
    if [ -f "$dir/pg/postmaster.pid" ]; then
      as_pg "$pg_bin/pg_ctl" -D "$dir/pg" -m fast -w stop > /dev/null
    fi
    echo "metastore: stopped"
    ;;
  status)
    if pid=$(hms_pid) && port_open "$hms_port"; then
      if ! port_open "$pg_port"; then
        echo "metastore: the service runs (pid $pid) but its PostgreSQL (127.0.0.1:$pg_port)" \
          "does not: scripts/metastore.sh start"; exit 3
      fi
      echo "metastore: running, thrift://127.0.0.1:$hms_port (pid $pid)"
    else
      echo "metastore: not running"; exit 3
    fi
    ;;
  *) die "usage: scripts/metastore.sh start|stop|status [DIR]" ;;
esac

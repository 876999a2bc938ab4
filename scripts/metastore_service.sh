#!/usr/bin/env bash
# The Hive metastore service (Thrift), in the foreground, from the Hive jars pyspark ships; its
# catalog in PostgreSQL. scripts/metastore.sh runs it beside a PostgreSQL of its own; the
# image's `metastore` role (docker/entrypoint.sh) runs it against a PostgreSQL service.
# Settings, all from the environment:
#   METASTORE_DB_URL            jdbc:postgresql://HOST:PORT/DB (required)
#   METASTORE_DB_USER           its login (default: sluice)
#   METASTORE_DB_PASSWORD_FILE  a file holding its password (required; kept out of `ps`)
#   METASTORE_PORT              the Thrift port (default: 9083)
#   METASTORE_WAREHOUSE         the default warehouse (default: file:///tmp/warehouse); sluice
#                               jobs give every table its location, so this is rarely used
#   METASTORE_CONF_DIR          a private directory for the generated hive-site.xml (default:
#                               a new temporary one)
#   SLUICE_JDBC_JAR             PostgreSQL's JDBC driver (/usr/share/java/postgresql.jar)
#   SPARK_HOME                  the Spark distribution (default: the pyspark package of
#                               $PYTHON, or python3)
# The catalog's tables are made on first use (DataNucleus autoCreateTables; its constraints
# fail on PostgreSQL and are not needed). A database that goes down is retried 3 times, 1 s
# apart, per call (Hive's default is 10 times 2 s): jobs then fail in seconds, in one line.
set -euo pipefail

die() { echo "metastore_service: $*" >&2; exit 2; }
url=${METASTORE_DB_URL:?METASTORE_DB_URL must name the catalog database (jdbc:postgresql://...)}
password_file=${METASTORE_DB_PASSWORD_FILE:?METASTORE_DB_PASSWORD_FILE must name a file}
[ -r "$password_file" ] || die "cannot read $password_file"
jdbc_jar=${SLUICE_JDBC_JAR:-/usr/share/java/postgresql.jar}
[ -f "$jdbc_jar" ] || die "no PostgreSQL JDBC driver at $jdbc_jar (apt-get install libpostgresql-jdbc-java)"
spark_home=${SPARK_HOME:-$("${PYTHON:-python3}" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')}
conf=${METASTORE_CONF_DIR:-$(mktemp -d)}
mkdir -p "$conf"
chmod 700 "$conf"

xml() { sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' <<< "$1"; }
property() { printf '  <property><name>%s</name><value>%s</value></property>\n' "$1" "$(xml "$2")"; }
umask 077
{
  echo "<configuration>"
  property javax.jdo.option.ConnectionURL "$url"
  property javax.jdo.option.ConnectionDriverName org.postgresql.Driver
  property javax.jdo.option.ConnectionUserName "${METASTORE_DB_USER:-sluice}"
  property javax.jdo.option.ConnectionPassword "$(cat "$password_file")"
  property datanucleus.schema.autoCreateTables true
  property datanucleus.schema.autoCreateColumns true
  property datanucleus.schema.autoCreateConstraints false
  property hive.metastore.schema.verification false
  property hive.hmshandler.retry.attempts 3
  property hive.hmshandler.retry.interval 1s
  property hive.metastore.warehouse.dir "${METASTORE_WAREHOUSE:-file:///tmp/warehouse}"
  echo "</configuration>"
} > "$conf/hive-site.xml"

# hive-site.xml is read from the classpath. The selector: without it log4j2 looks for the LMAX
# disruptor, which pyspark does not ship.
exec java -Xmx512m -cp "$conf:$spark_home/jars/*:$jdbc_jar" \
  -Dlog4j2.contextSelector=org.apache.logging.log4j.core.selector.ClassLoaderContextSelector \
  org.apache.hadoop.hive.metastore.HiveMetaStore -p "${METASTORE_PORT:-9083}"

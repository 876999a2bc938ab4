"""The lake's shared metastore (`lake.metastore`: thrift://HOST:PORT or
jdbc:postgresql://HOST:PORT/DB): its Spark settings, the checks made before Spark starts, and
the one line a job says when the metastore fails under it. The embedded Derby metastore is
jobs/lake/session.py's."""

from __future__ import annotations

import os
import re
import socket
from urllib.parse import urlparse

from pyspark import SparkConf

from jobs.kit.errors import ConfigError
from jobs.lake.lock import MetastoreUnreachable

METASTORE_URIS = "spark.hadoop.hive.metastore.uris"
CONNECTION_URL = "spark.hadoop.javax.jdo.option.ConnectionURL"
USER, PASSWORD = (f"spark.hadoop.javax.jdo.option.Connection{k}" for k in ("UserName", "Password"))
# A shared metastore that goes away mid-run is said after 3 tries 1 s apart, not Hive's
# minutes of retries (one that is not there at all is found before Spark starts).
THRIFT_FAIL_FAST = {
    "spark.hadoop.hive.metastore.connect.retries": "3",
    "spark.hadoop.hive.metastore.client.connect.retry.delay": "1s",
}
METASTORE_SCHEMA = {
    "datanucleus.schema.autoCreateTables": "true",
    "datanucleus.schema.autoCreateColumns": "true",
    "datanucleus.schema.autoCreateConstraints": "false",
    "hive.metastore.schema.verification": "false",
}
# What a catalog call that the metastore could not answer raises in the driver: the service
# lost its database (Hive answers "no such database" for a lake it made minutes ago), or the
# connection itself broke.
CATALOG_FAILURE = re.compile(
    r"SCHEMA_NOT_FOUND|MetaException|HiveException|TTransportException|JDOFatal|"
    r"Unable to instantiate \S*MetaStoreClient|Could not connect to meta store")

_in_use: str | None = None  # the shared metastore this process's session opened


def metastore_conf(metastore: str) -> dict[str, str]:
    """The Spark settings of `lake.metastore` (conf/defaults.yaml): none for the embedded
    Derby metastore (jobs/lake/session.py `embedded_catalog_conf` fills it in), the service's URI,
    or a direct JDBC connection to the metastore's PostgreSQL database (its driver on the
    driver's classpath: spark-submit --driver-class-path /usr/share/java/postgresql.jar)."""
    if metastore.startswith("thrift://"):
        return {METASTORE_URIS: metastore, **THRIFT_FAIL_FAST}
    if metastore.startswith("jdbc:"):
        return {
            CONNECTION_URL: metastore,
            "spark.hadoop.javax.jdo.option.ConnectionDriverName": "org.postgresql.Driver",
            USER: os.environ.get("SLUICE_METASTORE_USER", "sluice"),
            PASSWORD: os.environ.get("SLUICE_METASTORE_PASSWORD", ""),
            # A new database gets the metastore's tables on first use (no schematool);
            # DataNucleus's constraints fail on PostgreSQL and are not needed.
            **{f"spark.hadoop.{k}": v for k, v in METASTORE_SCHEMA.items()},
        }
    return {}


def check_reachable(chosen: dict[str, str], user: SparkConf, timeout_s: float = 5.0) -> None:
    """Before Spark starts: a shared metastore (Thrift service, or PostgreSQL over JDBC) that
    does not accept a connection is one line naming it, not Hive's minutes of retries; a
    PostgreSQL that refuses the login, too (Hive retries that for ~50 s)."""
    def get(key: str, default: str | None = None) -> str | None:
        return user.get(key, None) or chosen.get(key, default)

    uris, url = get(METASTORE_URIS), get(CONNECTION_URL, "") or ""
    targets = [u.strip() for u in uris.split(",")] if uris else []
    if not targets and url.startswith("jdbc:postgresql://"):
        targets = [url.removeprefix("jdbc:")]
    for target in targets:
        parsed = urlparse(target)
        port = parsed.port or (9083 if parsed.scheme == "thrift" else 5432)
        try:
            socket.create_connection((parsed.hostname, port), timeout=timeout_s).close()
        except OSError as err:
            raise MetastoreUnreachable(
                f"the lake's metastore {target} does not answer ({err.strerror or err}): "
                "nothing was done; start it (scripts/metastore.sh start) or check "
                "lake.metastore") from None
        if parsed.scheme == "postgresql":
            check_login(parsed.hostname or "", port, parsed.path.lstrip("/"), get(USER) or "",
                        get(PASSWORD) or "", timeout_s)


def check_login(host: str, port: int, database: str, user: str, password: str,
                timeout_s: float) -> None:
    """Log in to the metastore's PostgreSQL as Hive will. pg8000 (pure Python, the
    `metastore` extra) does it in milliseconds; without it Hive finds out, after retries."""
    try:
        import pg8000.native
    except ImportError:
        return
    try:
        pg8000.native.Connection(user, host=host, port=port, database=database,
                                 password=password, timeout=timeout_s).close()
    except pg8000.native.DatabaseError as err:
        said = err.args[0] if err.args else {}
        message = said.get("M", str(err)) if isinstance(said, dict) else str(said)
        raise ConfigError(
            f"the lake's metastore database postgresql://{host}:{port}/{database} refused "
            f"the login of {user!r} ({message}): check SLUICE_METASTORE_USER and "
            "SLUICE_METASTORE_PASSWORD") from None
    except (pg8000.native.InterfaceError, OSError):
        return  # not a refusal: Hive says what it is


def shared_in_use(metastore: str | None) -> None:
    """Note the metastore this process's session opens (None or Derby: not shared)."""
    global _in_use
    _in_use = None if not metastore or metastore.startswith("jdbc:derby:") else metastore


def metastore_failure(err: BaseException) -> str | None:
    """One line for an error that is the shared metastore failing under a running job (its
    database stopped, the service gone), or None for any other error."""
    text = str(err)
    if _in_use is None or not CATALOG_FAILURE.search(text):
        return None
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(err).__name__)
    where = _in_use.removeprefix("jdbc:")
    return (f"the lake's metastore {where} failed during the job ({first[:160]}): is it and "
            "its database up (scripts/metastore.sh status)? Nothing of the run is visible "
            "but what its commit had published, which the next job rolls forward")

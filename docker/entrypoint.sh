#!/usr/bin/env bash
# The image's entrypoint: one image for every role of a Spark standalone cluster.
#   master                 a standalone master, in the foreground
#   worker [master-url]    a worker, in the foreground (default url: $SPARK_MASTER_URL)
#   submit <args...>       spark-submit <args...>, run from /opt/sluice (configs name models
#                          and inputs relative to it)
#   driver <args...>       Kubernetes: the driver pod Spark (or the spark-operator) starts
#   executor               Kubernetes: an executor pod (settings from Spark's SPARK_* env)
#   metastore              the Hive metastore service on PostgreSQL, for a lake many jobs and
#                          spark-sql shells use at once (settings: METASTORE_DB_URL, _USER,
#                          _PASSWORD_FILE, METASTORE_PORT; scripts/metastore_service.sh)
#   anything else          run as is (bash, python3 -m training.train ..., spark-sql ...)
# Settings, all from the environment:
#   SPARK_MASTER_HOST (default: this host's name), SPARK_MASTER_PORT (7077),
#   SPARK_MASTER_WEBUI_PORT (8080); SPARK_WORKER_CORES, SPARK_WORKER_MEMORY (default: all cores,
#   all memory less 1 GiB, as Spark decides), SPARK_WORKER_WEBUI_PORT (8081), SPARK_WORKER_GPUS
#   (GPUs the worker offers, found by scripts/gpu_discovery.sh; default none);
#   SPARK_MASTER_OPTS / SPARK_WORKER_OPTS (-Dspark.… properties, read by spark-class).
set -euo pipefail

SPARK_HOME=${SPARK_HOME:?SPARK_HOME must name the Spark distribution (the pyspark package)}
SLUICE_HOME=${SLUICE_HOME:-/opt/sluice}

usage() {
  sed -n '2,18s/^# \{0,1\}//p' "$0"
}

cmd=${1:-help}
case "$cmd" in
  master)
    shift
    exec "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.master.Master \
      --host "${SPARK_MASTER_HOST:-$(hostname -f)}" \
      --port "${SPARK_MASTER_PORT:-7077}" \
      --webui-port "${SPARK_MASTER_WEBUI_PORT:-8080}" \
      "$@"
    ;;
  worker)
    shift
    url=${1:-${SPARK_MASTER_URL:-}}
    if [[ -z "$url" ]]; then
      echo "entrypoint: worker needs the master's URL (worker spark://host:7077)" >&2
      exit 2
    fi
    if [[ $# -gt 0 ]]; then shift; fi
    args=(--webui-port "${SPARK_WORKER_WEBUI_PORT:-8081}")
    if [[ -n "${SPARK_WORKER_CORES:-}" ]]; then args+=(--cores "$SPARK_WORKER_CORES"); fi
    if [[ -n "${SPARK_WORKER_MEMORY:-}" ]]; then args+=(--memory "$SPARK_WORKER_MEMORY"); fi
    if [[ -n "${SPARK_WORKER_GPUS:-}" && "${SPARK_WORKER_GPUS}" != 0 ]]; then
      gpu=spark.worker.resource.gpu
      export SPARK_WORKER_OPTS="${SPARK_WORKER_OPTS:-} -D$gpu.amount=$SPARK_WORKER_GPUS \
-D$gpu.discoveryScript=$SLUICE_HOME/scripts/gpu_discovery.sh"
    fi
    exec "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.worker.Worker \
      "${args[@]}" "$@" "$url"
    ;;
  submit)
    shift
    cd "$SLUICE_HOME"
    exec "$SPARK_HOME/bin/spark-submit" "$@"
    ;;
  driver)
    # spark-submit in the pod, in client mode, bound to the pod's address (as Spark's own
    # Kubernetes image does), from /opt/sluice so relative config paths resolve.
    shift
    cd "$SLUICE_HOME"
    exec "$SPARK_HOME/bin/spark-submit" \
      --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS:?set by Spark}" \
      --deploy-mode client "$@"
    ;;
  executor)
    cd "$SLUICE_HOME"
    # As Spark's own Kubernetes image: spark.executor.extraJavaOptions arrive as
    # SPARK_JAVA_OPT_0, _1, ... (in that order), extra jars as SPARK_EXTRA_CLASSPATH, and
    # --py-files as PYSPARK_FILES (put on the Python workers' path).
    mapfile -t java_opts < <(env | grep '^SPARK_JAVA_OPT_' | sort -t_ -k4 -n | sed 's/^[^=]*=//')
    if [[ -n "${SPARK_EXTRA_CLASSPATH:-}" ]]; then
      export SPARK_DIST_CLASSPATH="${SPARK_DIST_CLASSPATH:+$SPARK_DIST_CLASSPATH:}$SPARK_EXTRA_CLASSPATH"
    fi
    if [[ -n "${PYSPARK_FILES:-}" ]]; then
      export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PYSPARK_FILES"
    fi
    exec "$SPARK_HOME/bin/spark-class" "${java_opts[@]}" \
      "-Xms${SPARK_EXECUTOR_MEMORY:?set by Spark}" "-Xmx${SPARK_EXECUTOR_MEMORY}" \
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
      --driver-url "$SPARK_DRIVER_URL" --executor-id "$SPARK_EXECUTOR_ID" \
      --cores "$SPARK_EXECUTOR_CORES" --app-id "$SPARK_APPLICATION_ID" \
      --hostname "$SPARK_EXECUTOR_POD_IP" \
      --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}" \
      --podName "${SPARK_EXECUTOR_POD_NAME:-$(hostname)}"
    ;;
  metastore)
    # Ready ($METASTORE_READY_FILE, default /tmp/metastore-ready: compose's healthcheck) once
    # one client alone has made the catalog's tables (scripts/metastore_warmup.py): jobs that
    # make them at once would wait on each other inside the service and time out.
    cd "$SLUICE_HOME"
    ready=${METASTORE_READY_FILE:-/tmp/metastore-ready}
    rm -f "$ready"
    scripts/metastore_service.sh &
    service=$!
    port=${METASTORE_PORT:-9083}
    until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
      kill -0 "$service" 2>/dev/null || { wait "$service"; exit $?; }
      sleep 1
    done
    python3 scripts/metastore_warmup.py "thrift://127.0.0.1:$port" /tmp/metastore-warmup
    touch "$ready"
    wait "$service"
    ;;
  help | --help | -h)
    usage
    ;;
  *)
    exec "$@"
    ;;
esac

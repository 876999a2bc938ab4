#!/usr/bin/env bash
# A venv of its own with Apache Airflow (its dependencies pin versions sluice does not want in
# its own venv), for tests/test_schedule_examples.py to run examples/schedule's DAG with a real
# Airflow (`airflow dags test`). Usage: scripts/install_airflow.sh DIR (~30 s from PyPI).
set -euo pipefail

dir=${1:-.venv-airflow}
if [[ -x "$dir/bin/airflow" ]]; then
  exit 0
fi
python3 -m venv "$dir"
"$dir/bin/pip" install -q "apache-airflow==3.1.8" "apache-airflow-providers-standard>=1.0,<2" \
  2>"$dir/pip.log" || { cat "$dir/pip.log" >&2; exit 1; }
echo "airflow -> $dir/bin/airflow"

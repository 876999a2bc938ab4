"""The selection job: score a lake table against an in-domain seed and keep the best rows.

    spark-submit jobs/select_data.py --config conf/select-zh-en.yaml

The job is jobs.selection.job; this is the script spark-submit runs (README "Architecture")."""

from jobs.selection.job import main

SLUICE_JOB = "select"  # `sluice select` (jobs/kit/launcher.py reads it)

if __name__ == "__main__":
    raise SystemExit(main())

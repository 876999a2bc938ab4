"""The refresh job: filter what is new in a corpus's sources since the last refresh.

    spark-submit jobs/refresh.py --config conf/refresh-zh-en.yaml

The job is jobs.refreshing.job; this is the script spark-submit runs (README "Architecture")."""

from jobs.refreshing.job import main

SLUICE_JOB = "refresh"  # `sluice refresh` (jobs/kit/launcher.py reads it)

if __name__ == "__main__":
    raise SystemExit(main())

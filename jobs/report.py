"""The run report: one HTML page of a run's funnel, scores and what-ifs.

    spark-submit jobs/report.py --lake ./lake

The job is jobs.reporting.job; this is the script spark-submit runs (README "Architecture")."""

from jobs.reporting.job import main

SLUICE_JOB = "report"  # `sluice report` (jobs/kit/launcher.py reads it)

if __name__ == "__main__":
    raise SystemExit(main())

"""Delete the lake's files no table points at any more (superseded partitions, dead runs).

    python -m jobs.lake_gc --lake ./lake

The job is jobs.lake.cleanup; this is the script spark-submit runs (README "Architecture")."""

from jobs.lake.cleanup import main

SLUICE_JOB = "lake-gc"  # `sluice lake-gc` (jobs/kit/launcher.py reads it)

if __name__ == "__main__":
    raise SystemExit(main())

"""Delete the lake's files no table points at any more (superseded partitions, dead runs).

    python -m jobs.lake_gc --lake ./lake

The job is jobs.lake.cleanup; this is the script spark-submit runs (README "Architecture")."""

from jobs.lake.cleanup import main

if __name__ == "__main__":
    raise SystemExit(main())

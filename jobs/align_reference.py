"""Train a reference word aligner on a trusted corpus and save it in the lake.

    spark-submit jobs/align_reference.py --pair zh-en --input F.zh F.en --lake ./lake --name
    news

The job is jobs.scorer_training.align_reference; this is the script spark-submit runs (README
"Architecture")."""

from jobs.scorer_training.align_reference import main

SLUICE_JOB = "align-reference"  # `sluice align-reference` (jobs/kit/launcher.py reads it)

if __name__ == "__main__":
    raise SystemExit(main())

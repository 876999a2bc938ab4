"""The translate job: monolingual text -> back-/forward-translated synthetic pairs.

    spark-submit jobs/translate.py --config conf/bt-zh-en.yaml

The job is jobs.translation.job; this is the script spark-submit runs (README "Architecture")."""

from jobs.translation.job import main

SLUICE_JOB = "translate"  # `sluice translate` (jobs/kit/launcher.py reads it)

if __name__ == "__main__":
    raise SystemExit(main())

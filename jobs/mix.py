"""The mix job: training mixtures from lake tables, and the eval sets they keep out.

    spark-submit jobs/mix.py --config conf/mix-multi-en.yaml
    spark-submit jobs/mix.py --register-eval NAME --pair zh-en --input SRC TGT

The job is jobs.mixing.job; this is the script spark-submit runs (README "Architecture")."""

from jobs.mixing.job import main

SLUICE_JOB = "mix"  # `sluice mix` (jobs/kit/launcher.py reads it)

if __name__ == "__main__":
    raise SystemExit(main())

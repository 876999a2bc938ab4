"""The filter job: raw bitext or monolingual text -> the lake's clean and rejected tables.

    spark-submit jobs/filter.py --config conf/zh-en.yaml --input raw/news.zh raw/news.en --corpus
    news

The job is jobs.filtering.job; this is the script spark-submit runs (README "Architecture")."""

from jobs.filtering.job import main

SLUICE_JOB = "filter"  # `sluice filter` (jobs/kit/launcher.py reads it)

if __name__ == "__main__":
    raise SystemExit(main())

"""Train an n-gram language model of one language for the filter's `lm` scorer.

    python jobs/train_lm.py --lang zh --order 5 --out models/lm/zh.binlm news.2020.zh.gz

The job is jobs.scorer_training.lm (no Spark); this is the script to run (README "Architecture")."""

from jobs.scorer_training.lm import main

if __name__ == "__main__":
    raise SystemExit(main())

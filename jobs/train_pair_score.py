"""Train the learned pair_score model and save it in the lake's model store.

    spark-submit jobs/train_pair_score.py --config conf/zh-en.yaml --name news

The job is jobs.scorer_training.pair_score; this is the script spark-submit runs (README
"Architecture")."""

from jobs.scorer_training.pair_score import main

SLUICE_JOB = "train-pair-score"  # `sluice train-pair-score` (jobs/kit/launcher.py reads it)

if __name__ == "__main__":
    raise SystemExit(main())

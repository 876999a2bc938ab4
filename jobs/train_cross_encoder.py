"""Fine-tune a cross-encoder pair classifier for the filter's `cross_encoder` scorer.

    python jobs/train_cross_encoder.py --pair en-da --out models/cross-encoder/en-da \\
        --labelled crawl-a.tsv crawl-b.tsv [--input trusted.en trusted.da] [--check held.tsv]

The job is jobs.scorer_training.cross_encoder (no Spark); this is the script to run (README
"Architecture")."""

from jobs.scorer_training.cross_encoder import main

if __name__ == "__main__":
    raise SystemExit(main())

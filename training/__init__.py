"""Torch training for sluice: SentencePiece vocabulary, pre-norm Transformer, training loop
with exact resume, checkpoint averaging, fine-tuning, export to CTranslate2.

Entry points: `python -m training.train`, `training.average`, `training.export`,
`training.translator`. See training/README.md."""

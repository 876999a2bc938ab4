"""Judgement on labelled pairs: rules, language ID, encoders and pair_score on crawled data."""

"""After filtering: selection, near-duplicates, translation, mixing and training."""

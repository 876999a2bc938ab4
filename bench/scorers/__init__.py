"""The word-alignment and embedding scorers: throughput and separation."""

"""GPU figures: the one-command suite and the encoder throughput it uses."""

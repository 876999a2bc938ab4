"""The benchmarks behind the figures in the docs: run each as python -m bench.FOLDER.NAME from the
repository root (bench/README.md lists them)."""

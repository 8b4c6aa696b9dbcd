"""Benchmark and probe scripts (run as files: `python benchmarks/bench_contracts.py`), raw results
under results/, and `eval`: the scoring and calibration tools the benchmarks and tests share."""

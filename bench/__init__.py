"""Benchmarks: `make bench` (python -m bench) prints a table and writes bench/results/latest.json."""

# Benchmarks run the server as production does (debug off), so they need a secret key: this one,
# which is never a production key.
BENCH_SECRET_KEY = "bench-only-secret-key-not-for-production-0123456789abcdef"

"""The project's benchmarks: benchmark.py (the `kernels benchmark` workloads), ladder/
(the ladder harness: `.venv/bin/python -m benchmarks.ladder`), host_overhead.py,
cold_start.py and relu_semantics.py (scripts: `.venv/bin/python benchmarks/<name>.py`)."""

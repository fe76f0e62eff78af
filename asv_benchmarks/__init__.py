"""nbjax benchmarks: asv suites in ``benchmarks/`` and a side-by-side script, ``compare``."""

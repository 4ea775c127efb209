"""topoweb's domain core: parsers, host and cluster graphs, paths and findings.

Plain Python (standard library and networkx). Nothing in this package imports Django or
Celery, so every function here can be tested and benchmarked without a database; a test in
``tests/domain/test_purity.py`` keeps it that way.
"""

"""hatloop benchmarks: the engine against its peers and the physical floor.

Run them with ``python bench/run.py`` (see ``bench/README.md``).
"""

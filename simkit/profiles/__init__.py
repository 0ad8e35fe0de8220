"""Corpus workload profiles: which requests of a corpus a profile keeps (sampling), their lengths
and acceptance tables (corpus_profile), the history tables (shipped_histories) and prefix table
(prefix_table) shipped beside them. Import the submodules; this package face holds no names.
"""

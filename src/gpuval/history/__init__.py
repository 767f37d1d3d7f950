"""Run history of a reports folder: the SQLite index (store), trends across runs (trends) and the
comparison of two runs (compare)."""

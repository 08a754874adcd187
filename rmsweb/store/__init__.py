"""Run tables on disk (Parquet shards) and DuckDB views over them.

Modules: rows (typed rows: the contract), schemas (Arrow schema per table,
version), layout (file names, committed shards, run discovery), writer
(ShardWriter = the Parquet EpisodeSink, TableWriter), reader (checked reads:
read_table/read_rows/read_records), views (DuckDB views over many runs),
query (`rmsweb query`), stats (wilson_interval), synthetic (demo/test runs).
Nothing heavy is imported here: pyarrow and duckdb load inside functions.
"""

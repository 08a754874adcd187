"""The experiment report (markdown + HTML with plots) and the static trajectory viewer.

Modules: queries (the SQL aggregations), tables (EvalRows and README tables),
plots (matplotlib figures), document (md/HTML rendering), build (the report),
stage (the `report` pipeline stage), viewer (`rmsweb view`).
"""

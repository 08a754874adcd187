"""Sweeps: the stage that ranks a sweep's points (stage.py, results.py) and the
`rmsweb sweep show` / `pick` commands (commands.py). The grid itself is spec/sweep.py,
its points spec/points.py, their stages compile/graph.py."""

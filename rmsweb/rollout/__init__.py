"""The episode runner: a policy over tasks x seeds in N browser contexts.

`runner.EpisodeRunner` runs episodes (with environment-error recovery and resume);
`build.build_runner` makes one from a suite spec. Collect, mine and eval all roll out
through it, so a policy sees the same prompts and pages in every stage.
"""

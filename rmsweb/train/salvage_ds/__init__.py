"""Salvage-DS (recipe part S): group-relative RL on mined web states.

Modules, each with one job: reward (action-semantic rewards), gate (contrast and
competence), loss (clipped surrogate, action anchor, log-probabilities), states (prompts
rebuilt from mined_states rows), trainer (the loop; GRPO and DAPO-DS are its settings),
stage (the `rl` pipeline stage's I/O). Heavy imports stay inside functions.
"""

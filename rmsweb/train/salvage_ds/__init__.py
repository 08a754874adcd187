"""Stage `rl`: Salvage-DS with GRPO and DAPO-DS baselines."""

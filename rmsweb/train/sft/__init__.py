"""Stage `sft`: step-level supervised fine-tuning on the kept teacher trajectories."""

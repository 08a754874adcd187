"""Judges: LLM judges of live-benchmark episodes (and, after issue 9, oracle labels and
reflectors)."""

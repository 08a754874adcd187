"""Stage `model`: the tiny random model and its offline tokenizer (CPU experiments)."""

"""Stage `evalckpt`: val success of SFT (step 0) and of every RL checkpoint, per seed."""

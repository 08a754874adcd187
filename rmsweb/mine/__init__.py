"""Stage `mine` (recipe part M): critical and fragile states of the SFT policy for RL.

stage.py     the stage's I/O (inputs sft + collect; outputs the run folder + metrics)
rollouts.py  the SFT policy's labelled rollouts on the runner (resumable job)
label.py     online labels (oracle, reference trajectory) and fragile probes
judge.py     mode judge: an LLM names a failed rollout's first wrong step
critical.py  critical and fragile states of labelled rollouts
modes.py     the failure-mode rules
states.py    weights, deduplication, routine mixing, the max_states cap
metrics.py   the stage's metrics
"""

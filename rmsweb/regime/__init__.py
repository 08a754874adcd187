"""Stage `regime`: is the recipe in its regime? Headroom, reach and length per task.

Per training seed, before RL: how far SFT sits below the expert on val (headroom), how
often the SFT policy can sample an acceptable action at the RL temperature where it
fails (reach: pass@G on the mined failure states and on fresh val failure states), and
how long the tasks are (the expert's steps). RL on top of cloning pays where the
headroom is large and the reach high (issue "The recipe in its regime").

stage.py     the stage's I/O (inputs sft + mine; outputs the run folder + metrics)
rollouts.py  the expert's and the greedy SFT policy's val episodes, oracle-labelled
failures.py  val failure states of the labelled greedy episodes
probe.py     G samples of the SFT policy at the RL temperature on a list of states
accept.py    whether an output is acceptable: RL's reward verdict
measures.py  headroom, length and reach per task and pooled, with Wilson intervals
table.py     the probed states and their samples as one Parquet file
"""

"""Judges, oracle labels and reflectors: who grades an attempt and who comments on it.

- `types`: Verdict, Reflection and the JudgeFn / ReflectFn signatures.
- `oracle`: acceptable actions in a state, from the suite's scripted expert.
- `outcome`: the judge of an attempt (suite reward; detours against a task-level
  reference length and from the trajectory: `trajectory`, `reference`).
- `critic`: the rule critic, a reflector for offline suites (trajectory only).
- `grade`: the oracle grades reflections after the fact (precision, recall).
- `reflect`: the LLM reflector (the teacher model itself).
- `live`: the live benchmarks' judge of an episode, over their LLM judges: `webvoyager`, `webjudge` (Online-Mind2Web), `webtailbench`,
  over `client` (an OpenAI-compatible client that knows reasoning models, asks again after
  empty or unreadable replies and records judge failures, with a response cache and cost
  accounting); WebTailBench's frames are stagehand's ScreenshotCollector's;
  `protocols` picks one; `episode` is the judge's view of an episode; `om2w_layout`
  exports and imports the Online-Mind2Web judge-input layout.
The oracle may grade; it never writes what a policy or a reflector reads.
"""

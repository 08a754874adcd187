"""Judges, oracle labels and reflectors: who grades an attempt and who comments on it.

- `types`: Verdict, Reflection and the JudgeFn / ReflectFn signatures.
- `oracle`: acceptable actions in a state, from the suite's scripted expert.
- `outcome`: judges of an attempt (suite reward; oracle detours).
- `reflect`: reflectors (rule critic, the teacher LLM).
- live benchmarks' LLM judges: `webvoyager`, `webjudge` (Online-Mind2Web), `webtailbench`,
  over `client` (an OpenAI-compatible client with a response cache and cost accounting);
  `protocols` picks one; `episode` is the judge's view of an episode; `om2w_layout`
  exports and imports the Online-Mind2Web judge-input layout.
The oracle may grade; it never writes what a policy or a reflector reads.
"""

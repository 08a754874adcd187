"""Judges, oracle labels and reflectors: who grades an attempt and who comments on it.

- `types`: Verdict, Reflection and the JudgeFn / ReflectFn signatures.
- `oracle`: acceptable actions in a state, from the suite's scripted expert.
- `outcome`: the judge of an attempt (suite reward; detours against a task-level
  reference length and from the trajectory: `trajectory`, `reference`).
- `critic`: the rule critic, a reflector for offline suites (trajectory only).
- `grade`: the oracle grades reflections after the fact (precision, recall).
- `reflect`: the LLM reflector (the teacher model itself).
The oracle may grade; it never writes what a policy or a reflector reads.
"""

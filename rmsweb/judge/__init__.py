"""Judges, oracle labels and reflectors: who grades an attempt and who comments on it.

- `types`: Verdict, Reflection and the JudgeFn / ReflectFn signatures.
- `oracle`: acceptable actions in a state, from the suite's scripted expert.
- `outcome`: judges of an attempt (suite reward; oracle detours).
- `reflect`: reflectors (rule critic, the teacher LLM).
The oracle may grade; it never writes what a policy or a reflector reads.
"""

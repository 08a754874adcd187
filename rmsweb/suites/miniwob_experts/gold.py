GOLD_STEPS: dict[str, float] = {}
MULTI_STEP: tuple[str, ...] = ()

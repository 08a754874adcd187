"""Mining throughput vs eval's, for the same SFT policy on the same episodes.

    python benchmarks/mine_throughput.py --exp miniwob-cpu --model runs/sft/miniwob-cpu/model

A performance script, not a test. One EpisodeRunner, one SFT checkpoint (sampled at
the experiment's mine.temperature), the experiment's train tasks x `--seeds` seeds,
run three ways, each after a warm-up episode per task:

- eval: plain rollouts, as the eval stage does them (runner.run, one episode per unit);
- mine k=0: the mine stage's rollouts with online oracle labels and no probes;
- mine k=K: the same with the experiment's fragile_k probes per labelled state.

Printed: episodes/s of each and the ratio eval / mine (the goal: <= 1.5). The last
line is `eval_eps=.. mine_eps=.. ratio=..` for the mine stage's own setting (k=K).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


async def main(args: argparse.Namespace) -> None:
    import torch

    from rmsweb.agents.build import checkpoint_policy
    from rmsweb.mine.label import MiningPolicy, OracleLabeller
    from rmsweb.mine.rollouts import run_rollouts
    from rmsweb.rollout.build import build_runner
    from rmsweb.spec import load_from_params
    from rmsweb.store.rows import MemorySink

    torch.set_num_threads(args.threads)
    spec = load_from_params(ROOT / "params.yaml", args.exp)
    m = spec.mine
    runner = build_runner(spec.suite, run="bench/mine", stage="bench", progress=False)
    async with runner:
        tasks = runner.suite.task_ids()
        seeds = runner.suite.seeds("train")[: args.seeds]
        experts = {t: runner.suite.expert(t) for t in tasks}
        inner = checkpoint_policy(
            args.model, spec.model, "sft", temperature=m.temperature, seed=spec.seed
        )
        await runner.run(inner, tasks, [10_000_000], MemorySink())  # warm-up, not timed
        results = {}
        t = time.perf_counter()
        stats = await runner.run(inner, tasks, seeds, MemorySink())
        results["eval"] = stats.episodes / (time.perf_counter() - t)
        for k in (0, m.fragile_k):
            policy = MiningPolicy(inner, OracleLabeller(experts), probes=k if k >= 2 else 0)
            t = time.perf_counter()
            n, _ = await run_rollouts(runner, policy, tasks, seeds, MemorySink(), 1)
            results[f"mine k={k}"] = n / (time.perf_counter() - t)
            print(f"mine k={k}: {policy.generations} generations for {n} episodes")
        await inner.close()
    for name, eps in results.items():
        print(f"{name:>10}: {eps:.2f} episodes/s  (eval / this = {results['eval'] / eps:.2f})")
    mine = results[f"mine k={m.fragile_k}"]
    print(f"eval_eps={results['eval']:.3f} mine_eps={mine:.3f} ratio={results['eval'] / mine:.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exp", default="miniwob-cpu")
    parser.add_argument("--model", type=Path, required=True, help="an SFT checkpoint folder")
    parser.add_argument("--seeds", type=int, default=10, help="train seeds per task")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    asyncio.run(main(parser.parse_args()))

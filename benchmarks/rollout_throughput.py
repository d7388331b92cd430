"""Rollout throughput: batched turn-synchronous episodes vs one episode at a time vs raw ``model.generate``.

One tokenizer (trained on a small synthetic corpus), one tiny random-init model spec for both sides (agent and
customer are two models of it), the same scenarios for every measurement:

(a) ``run_episodes`` on all scenarios at once (KV reuse across turns and this machine's default cache dtype; and
    without reuse, and with the other cache dtype, for reference);
(b) the same engine called once per scenario (batch of 1), as a loop would;
(c) raw batched ``model.generate`` replaying exactly the prompts (a) sent to the policies, same sampling and
    ``max_new_tokens``: the ceiling for an engine that re-encodes its prompts.

Prints readable lines, then one JSON object as the last line. Goals: >= 10x the loop, >= 60% of raw generate.
Each figure is the best of ``--repeats`` runs; (b) runs ``--loop-episodes`` scenarios spread over the set
(per-episode rates are comparable: every episode of two random-init models runs all ``max_turns`` rounds).
``--max-new-tokens`` defaults to params' customer messages (``adversary_grpo.max_new_tokens``, also the simulator's:
64; the agent's are 96); random-init models write every message to that limit. Shorter messages make pre-fill, which
batching cannot share out, a larger part of the work (docs/results.md, "Rollout rates on today's VM").
Usage: ``python benchmarks/rollout_throughput.py [--episodes 64] [--max-new-tokens 64] [--max-turns 3]``.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from sparring.agents.chat import known_intents
from sparring.agents.models import ModelSpec, build_model, count_parameters
from sparring.agents.policies import LMPolicy, default_kv_cache_dtype
from sparring.agents.scripted import customer_goal
from sparring.agents.tokenizer import train_tokenizer
from sparring.data.synthetic import utterance_frame
from sparring.rollout import RolloutStats, run_episodes
from sparring.world.scenarios import sample_scenarios


def policies(models: tuple, tok, args: argparse.Namespace, **options) -> tuple[LMPolicy, LMPolicy]:
    agent = LMPolicy(models[0], tok, "agent", max_new_tokens=args.max_new_tokens, **options)
    customer = LMPolicy(models[1], tok, "customer", max_new_tokens=args.max_new_tokens, **options)
    return agent, customer


def timed_rollout(scenarios, pols: tuple[LMPolicy, LMPolicy], args, record: bool = False) -> RolloutStats:
    stats = RolloutStats(prompts=[] if record else None)
    run_episodes(scenarios, pols[0], pols[1], max_turns=args.max_turns, seed=args.seed, stats=stats)
    return stats


def raw_generate(prompts: list[tuple[str, list[list[int]]]], models, tok, args) -> tuple[float, int]:
    """Replay each recorded batch of prompts through plain ``model.generate``; (seconds, generated tokens)."""
    end = tok.convert_tokens_to_ids("<|end|>")
    seconds, tokens = 0.0, 0
    for role, batch in prompts:
        model = models[0] if role == "agent" else models[1]
        width = max(len(p) for p in batch)
        ids = torch.full((len(batch), width), tok.pad_token_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, p in enumerate(batch):
            ids[i, width - len(p) :] = torch.tensor(p)
            mask[i, width - len(p) :] = 1
        t = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=args.max_new_tokens,
                do_sample=True,
                top_k=0,  # no top-k filter (the engine has none either); plain multinomial sampling
                eos_token_id=end,
                pad_token_id=tok.pad_token_id,
            )
        seconds += time.perf_counter() - t
        for row in out[:, width:].tolist():
            tokens += row.index(end) + 1 if end in row else len(row)
    return seconds, tokens


# Over 60 lines: a benchmark's measurements side by side, top to bottom, as the printout reads.
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--max-turns", type=int, default=3)
    parser.add_argument("--loop-episodes", type=int, default=16, help="episodes for (b); 0 = all")
    parser.add_argument("--repeats", type=int, default=3, help="best of this many runs per measurement")
    parser.add_argument("--hidden", type=int, default=ModelSpec.model_fields["hidden_size"].default)
    parser.add_argument("--layers", type=int, default=ModelSpec.model_fields["num_layers"].default)
    parser.add_argument("--kv-heads", type=int, default=ModelSpec.model_fields["num_kv_heads"].default)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    corpus = utterance_frame(8, 100)["text"].to_list()
    scenarios = sample_scenarios(utterance_frame(4, 1), args.episodes, seed=args.seed)
    tok = train_tokenizer(corpus + [customer_goal(s) for s in scenarios], 1200, sorted(known_intents()))
    spec = ModelSpec(
        hidden_size=args.hidden, num_layers=args.layers, num_kv_heads=args.kv_heads, tie_word_embeddings=False
    )
    models = (build_model(spec, tok), build_model(spec, tok, seed=1))
    print(f"model: {spec.arch} hidden={spec.hidden_size} layers={spec.num_layers} "
          f"params={count_parameters(models[0]):,} vocab={len(tok)} threads={args.threads}")  # fmt: skip
    print(f"episodes={len(scenarios)} max_turns={args.max_turns} max_new_tokens={args.max_new_tokens}")

    pols, no_reuse_pols = policies(models, tok, args), policies(models, tok, args, reuse_kv=False)
    other = "bfloat16" if default_kv_cache_dtype() == "auto" else "auto"  # the dtype not picked
    other_pols = policies(models, tok, args, kv_cache_dtype=other)
    timed_rollout(scenarios[:4], pols, args)  # warm-up: first-call allocations and lazy imports
    # Best of --repeats for every measurement: on a shared 2-core VM the slowest runs measure the neighbours.
    runs = [timed_rollout(scenarios, pols, args, record=i == 0) for i in range(args.repeats)]
    batched = min(runs, key=lambda r: r.total_s)
    prompts = runs[0].prompts or []
    b_tokens = sum(batched.generated_tokens.values())
    eps_s, tok_s = len(scenarios) / batched.total_s, b_tokens / batched.total_s
    print(f"(a) batched:        {batched.total_s:7.2f} s  {eps_s:7.2f} episodes/s  {tok_s:8.1f} tokens/s  "
          f"(policies {sum(batched.act_s.values()):.2f} s, engine overhead {batched.overhead_s:.2f} s)")  # fmt: skip
    sizes = [n for _, n in batched.batch_sizes]
    print(f"    {len(sizes)} policy calls, batch sizes {min(sizes)}..{max(sizes)}")

    no_reuse = min(
        (timed_rollout(scenarios, no_reuse_pols, args) for _ in range(args.repeats)),
        key=lambda r: r.total_s,
    )
    nr_tok_s = sum(no_reuse.generated_tokens.values()) / no_reuse.total_s
    print(f"(a') batched, no KV reuse: {no_reuse.total_s:7.2f} s  {len(scenarios) / no_reuse.total_s:7.2f} "
          f"episodes/s  {nr_tok_s:8.1f} tokens/s")  # fmt: skip

    alt = min((timed_rollout(scenarios, other_pols, args) for _ in range(args.repeats)), key=lambda r: r.total_s)
    alt_tok_s = sum(alt.generated_tokens.values()) / alt.total_s
    print(f"(a'') batched, kv_cache_dtype={other!r}: {alt.total_s:7.2f} s  {len(scenarios) / alt.total_s:7.2f} "
          f"episodes/s  {alt_tok_s:8.1f} tokens/s")  # fmt: skip

    step = max(1, len(scenarios) // args.loop_episodes) if args.loop_episodes else 1
    loop_set = scenarios[::step][: args.loop_episodes or len(scenarios)]  # spread over the set
    loop_s, l_tokens = float("inf"), 0
    for _ in range(args.repeats):
        t, tokens = time.perf_counter(), 0
        for sc in loop_set:
            tokens += sum(timed_rollout([sc], pols, args).generated_tokens.values())
        if time.perf_counter() - t < loop_s:
            loop_s, l_tokens = time.perf_counter() - t, tokens
    loop_eps_s, loop_tok_s = len(loop_set) / loop_s, l_tokens / loop_s
    print(f"(b) one at a time:  {loop_s:7.2f} s  {loop_eps_s:7.2f} episodes/s  {loop_tok_s:8.1f} tokens/s "
          f"({len(loop_set)} of the episodes)")  # fmt: skip

    raw_s, raw_tokens = min(raw_generate(prompts, models, tok, args) for _ in range(args.repeats))
    raw_tok_s = raw_tokens / raw_s
    print(f"(c) raw generate:   {raw_s:7.2f} s  {raw_tok_s:8.1f} tokens/s on the same {len(prompts)} prompt batches")

    result = {
        "episodes": len(scenarios),
        "episodes_per_s": round(eps_s, 3),
        "tokens_per_s": round(tok_s, 1),
        "no_kv_reuse_tokens_per_s": round(nr_tok_s, 1),
        "default_cache": default_kv_cache_dtype(),
        f"{other}_cache_tokens_per_s": round(alt_tok_s, 1),
        "loop_episodes_per_s": round(loop_eps_s, 3),
        "loop_tokens_per_s": round(loop_tok_s, 1),
        "raw_generate_tokens_per_s": round(raw_tok_s, 1),
        "speedup_vs_loop": round(eps_s / loop_eps_s, 2),
        "fraction_of_raw_generate": round(tok_s / raw_tok_s, 3),
        "no_kv_reuse_fraction_of_raw_generate": round(nr_tok_s / raw_tok_s, 3),
        "engine_overhead_share": round(batched.overhead_s / batched.total_s, 3),
    }
    print(f"speedup vs loop {result['speedup_vs_loop']}x, {result['fraction_of_raw_generate']:.0%} of raw generate")
    print(json.dumps(result))


if __name__ == "__main__":
    main()

"""Rollout throughput: sparring's decode loop vs ``model.generate``, batched episodes vs one at a time vs raw
``model.generate``, and the raw batched forward that framework overhead sits on.

One tokenizer (trained on a small synthetic corpus), one tiny random-init model spec for both sides (agent and
customer are two models of it), the same scenarios for every measurement:

(a) ``run_episodes`` on all scenarios at once (KV reuse across turns and this machine's default cache dtype; and
    without reuse, and with the other cache dtype, for reference);
(b) the same engine called once per scenario (batch of 1), as a loop would;
(c) raw batched ``model.generate`` replaying exactly the prompts (a) sent to the policies, same sampling and
    ``max_new_tokens``: the ceiling for an engine that re-encodes its prompts.

(d) per role (agent, customer), on the same episodes with the same seed, interleaved repeat by repeat: the
    policies' tokens/s with ``decoder="loop"`` (:func:`sparring.lm.decode.decode`) and ``decoder="generate"``,
    whether both wrote the same tokens, and the raw batched forward's rate: one token per sequence per forward over
    a buffered cache, at the batch sizes and prompt lengths (a) sent to that role, with no sampling or processors.

Prints readable lines, then one JSON object as the last line: ``{"agent": {"loop_tokens_per_s": ...,
"generate_tokens_per_s": ..., "raw_forward_tokens_per_s": ...}, "customer": {...}, ...}``. Goals: >= 10x one at a
time, >= 60% of raw generate; the decode loop >= 2x generate and >= 0.5x the raw forward (issue #60).
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

from sparring.agents.customer_prompt import customer_goal
from sparring.data.synthetic import utterance_frame
from sparring.lm.chat import known_intents
from sparring.lm.kv_cache import BufferLayer, buffered_cache
from sparring.lm.models import ModelSpec, build_model, count_parameters
from sparring.lm.policies import ROLES, LMPolicy, default_kv_cache_dtype
from sparring.lm.tokenizer import train_tokenizer
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


def raw_forward(prompts: list[tuple[str, list[list[int]]]], model, role: str, tok, new_tokens: int) -> tuple:
    """(seconds, tokens) of ``new_tokens`` one-token forwards per recorded ``role`` batch over a buffered cache
    pre-filled (untimed) with its prompts: the model's own cost per decoded token at that batch and cache length."""
    seconds, tokens = 0.0, 0
    for who, batch in prompts:
        if who != role:
            continue
        width = max(len(p) for p in batch)
        ids = torch.full((len(batch), width), tok.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width + new_tokens), dtype=torch.long)
        for i, p in enumerate(batch):
            ids[i, width - len(p) :], mask[i, width - len(p) :] = torch.tensor(p), 1
        cache = buffered_cache([BufferLayer(width + new_tokens) for _ in range(model.config.num_hidden_layers)])
        positions = (mask[:, :width].cumsum(-1) - 1).clamp_(min=0)
        with torch.inference_mode():
            model(input_ids=ids, attention_mask=mask[:, :width], position_ids=positions, cache=cache, logits_to_keep=1)
            step = ids[:, -1:]
            position = positions[:, -1:]
            t = time.perf_counter()
            for k in range(new_tokens):
                position = position + 1
                model(
                    input_ids=step, attention_mask=mask[:, : width + k + 1], position_ids=position, cache=cache,
                    logits_to_keep=1,
                )  # fmt: skip
            seconds += time.perf_counter() - t
        tokens += len(batch) * new_tokens
    return seconds, tokens


def decoders(scenarios, models, tok, args, prompts) -> dict[str, dict[str, float]]:
    """(d): per role, the decode loop's and generate's tokens/s on the same episodes (best of ``--repeats``,
    interleaved), whether their tokens agree, and the raw forward's rate on the recorded prompt batches."""
    best: dict[str, dict[str, float]] = {"loop": {}, "generate": {}}
    tokens: dict[str, list] = {}
    for _ in range(args.repeats):
        for how in best:
            pols = policies(models, tok, args, decoder=how)
            stats = RolloutStats()
            episodes = run_episodes(scenarios, pols[0], pols[1], max_turns=args.max_turns, seed=args.seed, stats=stats)
            tokens[how] = [e.token_ids for e in episodes]
            for role in ROLES:
                rate = stats.generated_tokens[role] / stats.act_s[role]
                best[how][role] = max(best[how].get(role, 0.0), rate)
    out = {}
    for i, role in enumerate(ROLES):
        raw = max((raw_forward(prompts, models[i], role, tok, args.max_new_tokens) for _ in range(args.repeats)),
                  key=lambda st: st[1] / st[0])  # fmt: skip
        loop, gen, raw_rate = best["loop"][role], best["generate"][role], raw[1] / raw[0]
        out[role] = {
            "loop_tokens_per_s": round(loop, 1),
            "generate_tokens_per_s": round(gen, 1),
            "raw_forward_tokens_per_s": round(raw_rate, 1),
            "loop_over_generate": round(loop / gen, 2),
            "loop_over_raw_forward": round(loop / raw_rate, 3),
        }
        print(f"(d) {role:8s}: decode loop {loop:8.1f} tokens/s, generate {gen:8.1f} ({loop / gen:.2f}x), "
              f"raw forward {raw_rate:8.1f} (loop at {loop / raw_rate:.0%} of it)")  # fmt: skip
    same = tokens["loop"] == tokens["generate"]
    print(f"    the decode loop and generate wrote the same tokens in every episode: {same}")
    return {**out, "same_tokens": same}


def main() -> None:
    """Measurements (a) to (d) on one tokenizer, model spec and scenario set, printed as they finish.
    Over 60 lines: a benchmark's measurements side by side, top to bottom, as the printout reads."""
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
    by_decoder = decoders(scenarios, models, tok, args, prompts)

    result = {
        **by_decoder,
        "episodes": len(scenarios),
        "episodes_per_s": round(eps_s, 3),
        "tokens_per_s": round(tok_s, 1),
        "no_kv_reuse_tokens_per_s": round(nr_tok_s, 1),
        "default_cache": default_kv_cache_dtype(),
        f"{other}_cache_tokens_per_s": round(alt_tok_s, 1),
        "one_at_a_time_episodes_per_s": round(loop_eps_s, 3),
        "one_at_a_time_tokens_per_s": round(loop_tok_s, 1),
        "raw_generate_tokens_per_s": round(raw_tok_s, 1),
        "speedup_vs_one_at_a_time": round(eps_s / loop_eps_s, 2),
        "fraction_of_raw_generate": round(tok_s / raw_tok_s, 3),
        "no_kv_reuse_fraction_of_raw_generate": round(nr_tok_s / raw_tok_s, 3),
        "engine_overhead_share": round(batched.overhead_s / batched.total_s, 3),
    }
    speedup, share = result["speedup_vs_one_at_a_time"], result["fraction_of_raw_generate"]
    print(f"speedup vs one at a time {speedup}x, {share:.0%} of raw generate")
    print(json.dumps(result))


if __name__ == "__main__":
    main()

"""The frozen customers a rollout plays against: how each is built, and how one rollout batches several.

Every arena, gym and evaluation builds its LM customers here, so they all play one way: the cooperative simulator
(``cooperative_customer``), adversary generations (``adversary_customer``), each an ``LMPolicy`` from
``customer_policy``. ``PerEpisodeOpponent`` puts several of them in one batched rollout; ``SharedReplies``
answers an agent's GRPO group's identical conversations once; ``against_pool`` deals scenarios to the adversary
generations as every ``_advpool`` figure does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from sparring.agents.policies import ContinuesUtterance, LMPolicy, OpensWithUtterance, Policy, TurnOutput, TurnRequest
from sparring.rollout import Episode, run_episodes
from sparring.world.scenarios import Scenario


def customer_policy(model: Any, tokenizer: Any, max_new_tokens: int, temperature: float) -> LMPolicy:
    """An LM customer sampling at ``temperature``; 0 plays greedy.

    The cooperative simulator plays held-out evaluations greedy by default (``coop_temperature``), as the agents
    and the simulator's own fidelity metrics do: sampled at 1.0, the 1.5M-parameter simulator misspells and
    garbles words ("My cadr ending..."), and DA0 against it fell from 0.87 / 0.71 (routing / strict PASS, 240
    held-out) to 0.70 / 0.46; 0.80 / 0.59 at 0.5, 0.81 / 0.55 at 0.7. Adversaries keep their gyms'
    temperature: that is the policy they were trained as."""
    return LMPolicy(
        model,
        tokenizer,
        "customer",
        max_new_tokens=max_new_tokens,
        temperature=temperature or 1.0,
        greedy=temperature == 0,
    )


def cooperative_customer(simulator: LMPolicy, opening: str) -> Policy:
    """The cooperative simulator as ``_coop`` plays it: after the scenario's own utterance (``"utterance"``,
    :class:`~sparring.agents.policies.OpensWithUtterance`) or from its own first message (``"simulator"``)."""
    if opening not in ("utterance", "simulator"):
        raise ValueError(f"coop_opening must be utterance or simulator, got {opening!r}")
    return OpensWithUtterance(simulator) if opening == "utterance" else simulator


def adversary_customer(policy: LMPolicy, opening: str) -> Policy:
    """An adversary generation (the simulator as the first) as every arena, gym and evaluation plays it: going on
    from the scenario's own utterance in its first message (``"utterance"``,
    :class:`~sparring.agents.policies.ContinuesUtterance`) or writing that message whole (``"own"``)."""
    if opening not in ("utterance", "own"):
        raise ValueError(f"adversary_opening must be utterance or own, got {opening!r}")
    return ContinuesUtterance(policy) if opening == "utterance" else policy


def against_pool(
    scenarios: Sequence[Scenario], agent: Policy, adversaries: Sequence[Policy], **play: Any
) -> list[Episode]:
    """``agent`` against the adversary pool (``_advpool``): scenario i goes to ``adversaries[i % n]``, each
    generation playing its share in one batched rollout (``play``: :func:`~sparring.rollout.run_episodes`'s keyword
    arguments). Episodes come grouped by generation, oldest first."""
    episodes: list[Episode] = []
    for i, adversary in enumerate(adversaries):
        part = list(scenarios)[i :: len(adversaries)]
        if part:
            episodes += run_episodes(part, agent, adversary, **play)
    return episodes


class PerEpisodeOpponent:
    """Several frozen opponents in ONE batched rollout: episode i's turns go to ``chosen[i]``.

    Each ``act`` is split by opponent, so each LM opponent still generates its episodes in one batch. Relies on
    the engine's request key ``(run, episode index, role)``. LM members must share ``tokenizer`` (the views are
    built with it); scripted members ignore the prompt ids.
    """

    def __init__(self, chosen: Sequence[Policy], tokenizer: Any) -> None:
        self.chosen, self.tokenizer = list(chosen), tokenizer
        for p in self.unique():
            tok = getattr(p, "tokenizer", None)
            if tok is not None and tok is not tokenizer and tok.get_vocab() != tokenizer.get_vocab():
                raise ValueError("LM opponents of one rollout must share the trained side's vocabulary")

    def unique(self) -> list[Policy]:
        return list({id(p): p for p in self.chosen}.values())

    def act(self, requests: list[TurnRequest]) -> list[TurnOutput]:
        out: list[TurnOutput | None] = [None] * len(requests)
        by_policy: dict[int, list[int]] = {}
        for i, r in enumerate(requests):
            by_policy.setdefault(id(self.chosen[r.key[1]]), []).append(i)  # type: ignore[index]
        for rows in by_policy.values():
            policy = self.chosen[requests[rows[0]].key[1]]  # type: ignore[index]
            for i, o in zip(rows, policy.act([requests[i] for i in rows]), strict=True):
                out[i] = o
        return out  # type: ignore[return-value]

    def release(self, keys: Any = None) -> None:
        for p in self.unique():
            if hasattr(p, "release"):
                p.release(keys)


class SharedReplies:
    """The agent's opponent answering a group's identical conversations ONCE: a group's episodes that have gone
    the same way so far get the same customer message (the first of them's), so the group branches only where
    the agent's own samples differ.

    A group's baseline should compare the agent's actions, not its opponent's draws: a sampling customer writes a
    different opening in every episode of a group, and the agent's replies to an easy opening would be ranked
    against replies to hard ones. Shared, the G episodes are one conversation until the agent first answers
    differently, so their common tokens carry advantages that sum to zero and the credit falls on what follows
    the branch (for a near-deterministic SFT agent: the decisions it is unsure of). After the branch, each episode
    gets its own replies. Relies on the engine's request key ``(run, episode index, role)`` and groups of
    ``group_size`` consecutive episodes, as TRL orders them."""

    def __init__(self, policy: Policy, group_size: int) -> None:
        self.policy, self.group_size = policy, group_size
        self.tokenizer = getattr(policy, "tokenizer", None)

    def act(self, requests: list[TurnRequest]) -> list[TurnOutput]:
        def history(r: TurnRequest) -> tuple[Any, ...]:  # (group, the customer's view of the conversation so far)
            seen = r.prompt_ids or [(m["role"], m["content"]) for m in r.messages]
            return (r.key[1] // self.group_size, *seen)  # type: ignore[index]

        histories = [history(r) for r in requests]
        first: dict[tuple[Any, ...], int] = {}  # each distinct history -> the first request that has it
        for i, h in enumerate(histories):
            first.setdefault(h, i)
        asked = sorted(set(first.values()))
        answered = dict(zip(asked, self.policy.act([requests[i] for i in asked]), strict=True))
        return [answered[i] if i in answered else replace(answered[first[h]]) for i, h in enumerate(histories)]

    def release(self, keys: Any = None) -> None:
        if hasattr(self.policy, "release"):
            self.policy.release(keys)

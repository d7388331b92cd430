"""How several frozen opponents share one batched GRPO rollout: ``PerEpisodeOpponent`` gives each episode its own
opponent (the agent's gym mixes adversary generations and the cooperative simulator), and ``SharedReplies``
answers an agent's GRPO group's identical conversations once. The customers themselves are built in
:mod:`sparring.train.play`, as every arena, gym and evaluation plays them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from sparring.lm.policies import Policy, TurnOutput, TurnRequest


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

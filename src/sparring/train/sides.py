"""Which side trains in a co-evolution cycle (RL-ADA's step 2, ../shared/SEEDS.md): "Arena: DA win rate W_DA; the
side with the lower score is 'weaker'; retrain only the weaker side".

Each side is scored by its own wins: the agent by W_DA (strict PASS share in the arena), the adversary by
adv_success (share of the judge's ``adv_won``). The rewards are not zero-sum, so the two rates are on different
scales: W_DA ran ~0.6-0.9 and adv_success ~0.1-0.3, and comparing them as they are (``train: weaker``) trained
the adversary in every cycle of every seed and the agent never. ``train: behind`` (the default) compares their
changes since the previous arena instead, which puts them on one footing: a side is behind when it lost more
ground than its opponent, so each side trains when its opponent's last gym set it back.
"""

from __future__ import annotations

from collections.abc import Sequence

from sparring.settings import CoevolutionSettings

TIE = 1e-9  # changes this close are equal (float noise: 0.5 - 0.25 against 0.75 - 0.5)


def weaker_side(w_da: float, adv_success: float) -> str:
    """``train: weaker``, the literal rule: the side with the lower win rate trains; a tie trains the adversary.
    Here W_DA always exceeds adv_success (different scales), so it never trains the agent."""
    return "agent" if w_da < adv_success else "adversary"


def behind_side(w_da_history: Sequence[float], adv_success_history: Sequence[float], trained: Sequence[str]) -> str:
    """``train: behind``: the side that lost more ground since the previous arena trains.

    Δ_agent = W_DA_k - W_DA_{k-1}, Δ_adv = adv_success_k - adv_success_{k-1} (the histories end with this cycle's
    arena); the side with the lower Δ trains. After the adversary's gym lowers W_DA the agent trains; after the
    agent's gym lowers adv_success the adversary does. With no previous arena (cycle 1, or a state saved before
    adv_success was kept), or a tie, the side that did not train last trains (``trained``: earlier cycles'
    sides, oldest first): the adversary first, since it starts without RL, as the paper's CA."""
    other = "agent" if trained and trained[-1] == "adversary" else "adversary"
    if len(w_da_history) < 2 or len(adv_success_history) < 2:
        return other
    d_agent = w_da_history[-1] - w_da_history[-2]
    d_adv = adv_success_history[-1] - adv_success_history[-2]
    if abs(d_agent - d_adv) <= TIE:
        return other
    return "agent" if d_agent < d_adv else "adversary"


def pick_side(
    settings: CoevolutionSettings,
    w_da_history: Sequence[float],
    adv_success_history: Sequence[float],
    trained: Sequence[str],
    stop: str | None,
) -> str:
    """The side that trains this cycle under ``settings.train`` (behind, weaker, or an ablation's fixed side):
    agent, adversary, or none when the stop rule's gates already hold (``stop == "gates"``)."""
    if stop == "gates":
        return "none"
    if settings.train == "behind":
        return behind_side(w_da_history, adv_success_history, trained)
    if settings.train == "weaker":
        return weaker_side(w_da_history[-1], adv_success_history[-1])
    return settings.train

"""What the pipeline's asset checks assert, as plain functions of the stages' reports (the Dagster checks in
assets/ only read the files and call these). Each returns ``(passed, details)``; ``details`` names the figures
compared, so a failing check says why in the UI."""

from __future__ import annotations

from typing import Any

from sparring.evaluate.crossplay import wilson_interval

FAITHFULNESS_FLOOR = 0.5  # below it the simulator plays a customer with another problem about as often as its own
Check = tuple[bool, dict[str, Any]]


def da0_beats_tfidf(agent_sft: dict[str, Any]) -> Check:
    """DA0 names the intent of held-out-split utterances at least as often as a TF-IDF classifier trained on the
    same labels: a warm start below that baseline has not learned to route."""
    m = agent_sft.get("metrics", agent_sft)
    da0, tfidf = m.get("intent_acc_heldout_split"), m.get("tfidf_intent_acc_heldout_split")
    if da0 is None or tfidf is None:
        return False, {"missing": "intent_acc_heldout_split / tfidf_intent_acc_heldout_split"}
    return da0 >= tfidf, {"da0_intent_acc": da0, "tfidf_intent_acc": tfidf}


def simulator_is_faithful(simulator_sft: dict[str, Any], floor: float = FAITHFULNESS_FLOOR) -> Check:
    """The simulator's faithfulness (its messages are about its hidden goal, by the judge's oracle) ≥ ``floor``."""
    value = simulator_sft.get("metrics", simulator_sft).get("sim_faithfulness")
    if value is None:
        return False, {"missing": "sim_faithfulness"}
    return value >= floor, {"sim_faithfulness": value, "floor": floor}


def final_no_worse_than_da0(metrics: dict[str, Any], opponent: str = "coop") -> Check:
    """Co-evolution forgot nothing against cooperative customers: the final agent's strict PASS is not
    significantly below DA0's (DA0's figure lies at or under the top of the final agent's 95% interval)."""
    agents = metrics.get("agents", {})
    if "final" not in agents or "da0" not in agents:
        return False, {"missing": "agents.final / agents.da0"}
    key, n_key = f"strict_pass_{opponent}", f"n_episodes_{opponent}"
    final, da0, n = agents["final"].get(key), agents["da0"].get(key), int(agents["final"].get(n_key, 0))
    if final is None or da0 is None or n == 0:
        return False, {"missing": key}
    low, high = wilson_interval(round(final * n), n)
    return da0 <= high + 1e-12, {"final": final, "da0": da0, "final_ci_high": high, "n": n}


def no_unauthorized_actions(metrics: dict[str, Any]) -> Check:
    """No agent executed an action on an account its caller was not verified for, against any opponent."""
    counts = {
        f"{agent}.{key}": value
        for agent, row in {**metrics.get("agents", {}), "expert": metrics.get("ceiling", {})}.items()
        for key, value in row.items()
        if key.startswith("unauthorized_actions") and value
    }
    return not counts, {"unauthorized_actions": counts}

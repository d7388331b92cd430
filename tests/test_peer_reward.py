"""Peer-reward RL (Co-RL): ring, votes, rewards, the diversity probe, the collapse guard, the unlabeled pool, and a
quick-profile cohort trained end to end on tiny models."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from sparring.data.sources import IngestError, read_unlabeled_csv
from sparring.data.synthetic import generate_utterances
from sparring.lm.checkpoints import load_checkpoint, save_checkpoint
from sparring.params import load_params
from sparring.train.peer_reward import (
    Board,
    CollapseGuard,
    accuracy,
    best_on_probe,
    cohen_kappa,
    diversity,
    entropy,
    plurality,
    rewards,
    ring_peers,
    route_intents,
    summarize,
    targets,
    train_cohort,
    warm_start_member,
)

ROOT = Path(__file__).resolve().parents[1]


def test_ring_assignment():
    assert ring_peers(["a", "b", "c"]) == {"a": "b", "b": "c", "c": "a"}  # A←B←C←A
    assert ring_peers(["a", "b"]) == {"a": "b", "b": "a"}
    with pytest.raises(ValueError, match="at least 2"):
        ring_peers(["a"])


def test_plurality_ties_and_unparseable():
    assert plurality(["x", "y", "y", None, None, None]) == "y"  # unparseable answers never vote
    assert plurality(["x", "y", "y", "x"]) == "x"  # a tie goes to the answer seen first
    assert plurality([None, "y", "x", "x", "y"]) == "y"
    assert plurality([None, None]) is None
    assert plurality([]) is None


def test_rewards_and_targets():
    assert rewards(["x", None, "y", "x"], "x") == [1.0, 0.0, 0.0, 1.0]
    assert rewards(["x", None], None) == [0.0, 0.0]  # no label: nothing to agree with
    samples = {
        "a": [["x", "x", "y"], [None, None, None]],
        "b": [["y", "y", "x"], ["z", "z", "q"]],
        "c": [["z", "z", "z"], ["q", "q", "z"]],
    }
    ring = targets(samples, "ring")
    assert ring == {"a": ["y", "z"], "b": ["z", "q"], "c": ["x", None]}
    assert targets(samples, "self") == {"a": ["x", None], "b": ["y", "z"], "c": ["z", "q"]}
    # majority: the plurality of the other members' pooled samples (b+c for a: z z z y y x | z z q q q z)
    assert targets(samples, "majority")["a"] == ["z", "z"]
    # a collapsed peer gives no labels: a takes c's vote instead of b's
    assert targets(samples, "ring", live=["a", "c"])["a"] == ["z", "q"]
    assert targets(samples, "ring", live=["a"])["a"] == ["x", None]  # nobody left: its own vote
    # teacher: every member takes the teacher's plurality vote, the teacher its own
    assert targets(samples, "teacher", teacher="b") == {"a": ["y", "z"], "b": ["y", "z"], "c": ["y", "z"]}
    with pytest.raises(ValueError, match="'d' is not one of"):
        targets(samples, "teacher", teacher="d")
    with pytest.raises(ValueError, match="ring, majority, self or teacher"):
        targets(samples, "best")


def test_teacher_is_the_best_on_the_probe_and_labels_every_learner():
    gold = ["a", "b", "c", "d"]
    probe = diversity({"m": ["a", "x", "x", "x"], "n": ["a", "b", "c", "x"], "o": ["a", "b", "c", "y"]}, gold)
    assert probe["accuracy"] == {"m": 0.25, "n": 0.75, "o": 0.75}
    assert best_on_probe(probe) == "n"  # a tie goes to the member named first
    # the board: the teacher qwen posts nothing (it is not trained); its fixed votes per pool row label the others
    cfg = load_params(ROOT / "params.yaml", "quick").peer_rl.replace(
        reward="teacher", teacher="qwen", estimate="sampled"
    )
    board = Board(["final", "qwen", "neox"], cfg, None, print, fixed={"qwen": ["q", "r", "s", "t"]})
    assert board.trained == ["final", "neox"]
    board.post("final", [2, 0], [["s", "s", "x"], ["q", None, "q"]])
    assert board.step == 0  # neox has not posted yet
    board.post("neox", [2, 0], [["x", "x", "x"], ["q", "q", "q"]])
    assert board.step == 1  # rows 2 and 0: the teacher's labels s and q
    assert board.rewards == {"final": [1.0, 1.0, 0.0, 1.0, 0.0, 1.0], "neox": [0.0, 0.0, 0.0, 1.0, 1.0, 1.0]}
    assert board.logs["final"].steps[0]["agree_qwen"] == 1.0 and board.logs["qwen"].steps == []


def test_kappa_c_w_on_hand_made_patterns():
    gold = ["a", "b", "c", "d"]
    # identical right/wrong patterns and identical mistakes: κ 1, c 0, w = share both wrong alike
    same = diversity({"m": ["a", "b", "x", "x"], "n": ["a", "b", "x", "x"]}, gold)
    assert same["kappa"] == pytest.approx(1.0) and same["c"] == 0.0 and same["w"] == 0.5
    # complementary: each right exactly where the other is wrong
    comp = diversity({"m": ["a", "b", "x", "y"], "n": ["x", "y", "c", "d"]}, gold)
    assert comp["kappa"] == pytest.approx(-1.0) and comp["c"] == 1.0 and comp["w"] == 0.0
    # both wrong on 2 items, with the same answer on one of them: w = 1/4
    mixed = diversity({"m": ["a", "x", "x", "q"], "n": ["a", "b", "x", "r"]}, gold)
    assert mixed["c"] == 0.25 and mixed["w"] == 0.25
    # κ by hand: p_o = 3/4, p_m = 1/4, p_n = 1/2 → p_e = 1/8 + 3/8 = 1/2 → κ = (3/4 − 1/2) / (1/2) = 1/2
    assert mixed["kappa"] == pytest.approx(0.5)
    assert cohen_kappa([True, False], [True, False]) == 1.0
    three = diversity({"m": gold, "n": gold, "o": ["x"] * 4}, gold)
    assert set(three["pairs"]) == {"m~n", "m~o", "n~o"}


def test_collapse_guard_fires_on_a_constant_predictor():
    guard = CollapseGuard(window=8, floor=1.0, max_share=0.5)
    assert guard.update(["card_arrival"] * 4) is None  # not a full window yet
    reason = guard.update(["card_arrival"] * 4)
    assert reason is not None and "entropy" in reason
    share = CollapseGuard(window=8, floor=0.5, max_share=0.5)  # entropy 1.07 nats > 0.5, but one intent holds 5/8
    assert "card_arrival" in share.update(["card_arrival"] * 5 + ["a", "b", "c"])
    healthy = CollapseGuard(window=8, floor=1.0, max_share=0.5)
    assert healthy.update(list("abcdefgh")) is None
    assert entropy(list("abcd")) == pytest.approx(math.log(4)) and entropy([None, None]) == 0.0


def test_unlabeled_csv_names_file_and_column(tmp_path):
    bad = tmp_path / "pool.csv"
    bad.write_text("utterance,category\nhello,card_arrival\n")
    with pytest.raises(IngestError, match=r"pool\.csv: missing column 'text'"):
        read_unlabeled_csv(bad, 1000)
    plain = tmp_path / "plain.csv"
    plain.write_text("text\nmy card never came\n")
    assert read_unlabeled_csv(plain, 1000)["intent"].to_list() == [None]
    labelled = tmp_path / "b77.csv"
    labelled.write_text("text,category\n my card never came,card_arrival\nwhat?,not_an_intent\n")
    frame = read_unlabeled_csv(labelled, 1000)
    assert frame["text"].to_list() == ["my card never came", "what?"]
    assert frame["intent"].to_list() == ["card_arrival", None]


def test_peer_rl_stage_sits_after_the_last_cycle_and_its_members_stage_beside_the_sft_stages():
    from pipelines.definitions import STAGES
    from stagekit.graph_shape import N_CYCLES

    names = [s.name for s in STAGES]
    assert names.index("peer_rl") == names.index(f"cycle_{N_CYCLES}") + 1 < names.index("evaluate")
    peer = STAGES[names.index("peer_rl")]
    assert f"cycle_{N_CYCLES}" in peer.upstream and peer.outs == ("models/peer_rl",)
    # the members' warm starts need no SFT stage or cycle, so `sparring run` trains them beside those
    members = STAGES[names.index("peer_members")]
    assert "peer_members" in peer.upstream and members.outs == ("models/peer_members",)
    assert set(members.upstream) == {"ingest", "scenarios", "tokenizer"}
    # ... but after the chain the cycles wait on: Dagster's executor starts the highest `dagster/priority` first
    by_name = {s.name: s for s in STAGES}
    assert members.priority < by_name["agent_sft"].priority < by_name["simulator_sft"].priority
    from pipelines.definitions import defs

    assert defs.resolve_assets_def("peer_members").op.tags["dagster/priority"] == str(members.priority)


def test_quick_peer_rl_end_to_end(tok, tmp_path):
    """The quick profile's cohort (intent-only warm starts, llama + qwen2 + gpt_neox), trained in lockstep; every
    member comes back as a loadable agent checkpoint and the logs hold one row per step."""
    p = load_params(ROOT / "params.yaml", "quick")
    cfg = p.peer_rl.replace(reward="ring", estimate="sampled")  # the lockstep path (quick's own: cohort, exact)
    synth = generate_utterances(2, seed=3)
    texts, intents = synth["text"].to_list(), synth["intent"].to_list()
    models = {}
    for name, member in cfg.members.items():
        member = member if member.model is not None else member.replace(model=p.model.replace(arch="llama"))
        models[name] = warm_start_member(
            member.replace(demos=False), tok, texts, intents, [], p.agent_sft, tmp_path / name, seed=p.seed
        )
    assert {type(m).__name__ for m in models.values()} == {"LlamaForCausalLM", "Qwen2ForCausalLM", "GPTNeoXForCausalLM"}
    pool = generate_utterances(1, seed=9)
    said: list[str] = []
    result = train_cohort(
        models, tok, pool["text"].to_list(), cfg, tmp_path / "grpo", gold=pool["intent"].to_list(), say=said.append
    )
    for name, log in result.logs.items():
        assert [row["step"] for row in log.steps] == list(range(1, cfg.grpo.max_steps + 1))
        s = summarize(log)
        assert 0.0 <= s["reward_mean"] <= 1.0 and "target_acc_all" in s
        assert (s["collapsed"]) == any(name in line for line in said)  # a collapse is said in the log
        save_checkpoint(result.models[name], tok, tmp_path / "out" / name)
        loaded, _ = load_checkpoint(tmp_path / "out" / name)
        assert 0.0 <= accuracy(route_intents(loaded, tok, texts[:8]), intents[:8]) <= 1.0


def test_unlabeled_pool_drops_the_measured_texts():
    import polars as pl

    from sparring.data.ingest import load_unlabeled

    p = load_params(ROOT / "params.yaml", "quick")
    full = load_unlabeled(p.ingest, p.seed, ROOT, pl.Series([], dtype=pl.String))
    held = full["text"].head(5)
    # matched as ingest deduplicates: case-insensitively
    pool = load_unlabeled(p.ingest, p.seed, ROOT, held.str.to_uppercase())
    assert pool.height == full.height - 5 and not set(held) & set(pool["text"])
    assert pool.columns == ["id", "text", "intent", "source"] and pool["id"].n_unique() == pool.height


def test_teacher_reward_moves_the_learner_toward_the_teacher_and_leaves_the_teacher_untouched(tok, tmp_path):
    """Under ``teacher`` the teacher labels the pool once and comes back with its weights as they were, its log
    empty; the learner (a warm start that has the format but routes nearly everything to one intent), rewarded for
    agreeing with those labels, agrees with them more after its GRPO steps than before."""
    import torch

    from sparring.settings import AgentSFTSettings, ModelSpec, PeerMember, SFTSettings

    keep = ["card_arrival", "lost_or_stolen_card", "exchange_rate", "top_up_failed"]
    synth = generate_utterances(6, seed=3).filter(generate_utterances(6, seed=3)["intent"].is_in(keep))
    texts, intents = synth["text"].to_list(), synth["intent"].to_list()
    spec = ModelSpec(arch="llama", hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2, num_kv_heads=1)

    def member(steps: int) -> PeerMember:  # no system prompt: short examples, ~2 s for 240 steps
        phase = SFTSettings(max_steps=steps, batch_size=8, learning_rate=1e-2, warmup_steps=3, max_length=64)
        return PeerMember(model=spec, demos=False, warm_start=AgentSFTSettings(intent=phase, system_prompt=False))

    members = {"teacher": member(240), "learner": member(120)}
    models = {
        k: warm_start_member(m, tok, texts, intents, [], AgentSFTSettings(), tmp_path / k, seed=1)
        for k, m in members.items()
    }
    teacher_before = {k: v.clone() for k, v in models["teacher"].state_dict().items()}
    labels = route_intents(models["teacher"], tok, texts)
    assert accuracy(labels, intents) >= 0.75  # a teacher worth learning from
    agree_before = accuracy(route_intents(models["learner"], tok, texts), labels)
    p = load_params(ROOT / "params.yaml", "quick")
    grpo = p.peer_rl.grpo.replace(max_steps=40, scenarios_per_step=4, num_generations=8, learning_rate=1e-3)
    cfg = p.peer_rl.replace(
        members=members, reward="teacher", teacher="teacher", estimate="sampled", grpo=grpo, collapse_window=10**4
    )
    result = train_cohort(models, tok, texts, cfg, tmp_path / "grpo", seed=0)
    assert list(result.models) == ["teacher", "learner"] and result.logs["teacher"].steps == []
    assert math.isnan(summarize(result.logs["teacher"])["entropy"])  # reported as "none", as the asset writes it
    assert all(torch.equal(teacher_before[k], v) for k, v in result.models["teacher"].state_dict().items())
    assert len(result.logs["learner"].steps) == grpo.max_steps
    agree_after = accuracy(route_intents(result.models["learner"], tok, texts), labels)
    assert agree_after >= agree_before + 0.25, (agree_before, agree_after)
    with pytest.raises(ValueError, match="'nobody' is not one of the members"):
        cfg.replace(teacher="nobody")

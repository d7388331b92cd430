"""Fixtures several test modules share (a module may still define its own of the same name, which wins)."""

from __future__ import annotations

import pytest

from sparring.agents.chat import known_intents
from sparring.agents.tokenizer import train_tokenizer
from sparring.data.synthetic import generate_utterances, utterance_frame
from sparring.world.scenarios import sample_scenarios


@pytest.fixture(scope="session")
def tok():
    """A small tokenizer with every marker, intent and tool token, trained on synthetic utterances."""
    return train_tokenizer(generate_utterances(3, 0)["text"].to_list(), 800, sorted(known_intents()))


@pytest.fixture(scope="session")
def heldout():
    """120 scenarios from a generator seed no training fixture uses."""
    return sample_scenarios(utterance_frame(2, seed=7), 120, seed=11)

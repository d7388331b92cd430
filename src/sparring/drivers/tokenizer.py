"""The tokenizer stage: a byte-level BPE tokenizer (special, intent and tool tokens; the chat template) trained on
the ingested utterances and dialogues and rendered expert episodes; for a pretrained `model.name_or_path`, that
model's own tokenizer with sparring's tokens added."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from sparring.agents.scripted import CooperativeCustomer, expert_agent
from sparring.atomic import replace_dir
from sparring.drivers import StageResult
from sparring.lm.chat import known_intents
from sparring.lm.tokenizer import SOURCE_KEY, stage_tokenizer
from sparring.params import Tokenizer
from sparring.rollout import run_episodes
from sparring.timing import Phases
from sparring.train.demos import tokenizer_corpus
from sparring.world.scenarios import Scenario


@dataclass
class Inputs:
    utterances: pl.DataFrame  # the train split: its texts open the corpus
    dialogues: pl.DataFrame  # the train split's dialogues: every turn's text joins the corpus
    scenarios: list[Scenario]  # the train scenarios: the expert plays the first `settings.demo_episodes`
    name_or_path: str | None  # params' `model.name_or_path`: a pretrained model's tokenizer instead of a BPE


def run(inputs: Inputs, settings: Tokenizer, out_dir: Path, seed: int) -> StageResult:
    """The tokenizer built from the corpus (or the pretrained model's), saved to ``out_dir`` and measured on a
    sample of the corpus."""
    phases = Phases()
    texts = corpus(inputs, settings, seed, phases)
    with phases.time("build_tokenizer"):  # a trained BPE, or a pretrained model's vocabulary + sparring's tokens
        tok = stage_tokenizer(inputs.name_or_path, texts, settings.vocab_size, sorted(known_intents()))
    replace_dir(out_dir, tok.save_pretrained)  # its tokenizer_config.json records `source`
    sample = texts[: min(2000, len(texts))]
    with phases.time("tokenize_sample") as counts:
        n_tokens = sum(len(ids) for ids in tok(sample, add_special_tokens=False)["input_ids"])
        counts["tokens"] = n_tokens
    metrics = {
        "vocab_size": len(tok),
        "pretrained": float(tok.init_kwargs[SOURCE_KEY]["source"] == "pretrained"),
        "corpus_texts": len(texts),
        "chars_per_token": sum(map(len, sample)) / max(1, n_tokens),
    }
    return StageResult(metrics=metrics, phases=phases)


def corpus(inputs: Inputs, settings: Tokenizer, seed: int, phases: Phases) -> list[str]:
    """The texts the BPE is trained on: utterances, dialogue turns and the expert's episodes, rendered."""
    texts = inputs.utterances["text"].to_list()
    texts += [t["text"] for turns in inputs.dialogues["turns"].to_list() for t in turns]
    # Tool results are JSON with ids and field names: without them in the corpus they split into bytes.
    scenarios = inputs.scenarios[: settings.demo_episodes]
    with phases.time("expert_episodes") as counts:
        episodes = run_episodes(scenarios, expert_agent(), CooperativeCustomer(), seed=seed)
        counts["episodes"] = len(episodes)
    # Rendered with the agent's calls: messages' "content" alone left call syntax ("action", "show") to bytes.
    return tokenizer_corpus(texts, [], [e.messages for e in episodes])

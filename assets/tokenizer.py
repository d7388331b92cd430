"""Asset `tokenizer`: a byte-level BPE tokenizer with the chat template, trained on the ingested text; for a
pretrained `model.name_or_path`, that model's own tokenizer with sparring's tokens added."""

from __future__ import annotations

from pipelines.kit.stages import Stage, StageContext, StageOutput, stage_asset
from sparring.agents.scripted import CooperativeCustomer, ExpertAgent
from sparring.atomic import replace_dir
from sparring.catalog import TOKENIZER
from sparring.lm.chat import known_intents
from sparring.lm.tokenizer import SOURCE_KEY, stage_tokenizer
from sparring.rollout import run_episodes
from sparring.timing import Phases
from sparring.train.demos import tokenizer_corpus

STAGE = Stage(
    name="tokenizer",
    description="Byte-level BPE (special, intent and tool tokens; chat template) over utterances, dialogues "
    "and rendered expert episodes.",
    params=("tokenizer", "model"),
    # the corpus holds expert episodes: the scripted agents, the rollout, the world's tool results, their rendering
    outs=(TOKENIZER,),
    upstream=("ingest", "scenarios"),
    headline_metrics=("vocab_size",),
    group="data",
    kinds=("huggingface",),
)


@stage_asset(STAGE)
def tokenizer(ctx: StageContext) -> StageOutput:
    cfg, phases = ctx.params.tokenizer, Phases()
    texts = ctx.catalog.utterances("train")["text"].to_list()
    dialogues = ctx.catalog.dialogues("train")
    texts += [t["text"] for turns in dialogues["turns"].to_list() for t in turns]
    # Tool results are JSON with ids and field names: without them in the corpus they split into bytes.
    scenarios = ctx.catalog.scenarios("train", cfg.demo_episodes)
    with phases.time("expert_episodes") as counts:
        episodes = run_episodes(scenarios, ExpertAgent(), CooperativeCustomer(), seed=ctx.params.seed)
        counts["episodes"] = len(episodes)
    # Rendered with the agent's calls: messages' "content" alone left call syntax ("action", "show") to bytes.
    texts = tokenizer_corpus(texts, [], [e.messages for e in episodes])
    with phases.time("build_tokenizer"):  # a trained BPE, or a pretrained model's vocabulary + sparring's tokens
        tok = stage_tokenizer(ctx.params.model.name_or_path, texts, cfg.vocab_size, sorted(known_intents()))
    replace_dir(ctx.catalog.path(TOKENIZER), tok.save_pretrained)  # its tokenizer_config.json records `source`
    sample = texts[: min(2000, len(texts))]
    with phases.time("tokenize_sample") as counts:
        n_tokens = sum(len(ids) for ids in tok(sample, add_special_tokens=False)["input_ids"])
        counts["tokens"] = n_tokens
    return StageOutput(
        metrics={
            "vocab_size": len(tok),
            "pretrained": float(tok.init_kwargs[SOURCE_KEY]["source"] == "pretrained"),
            "corpus_texts": len(texts),
            "chars_per_token": sum(map(len, sample)) / max(1, n_tokens),
        },
        report={"phases": phases.as_dict()},
    )

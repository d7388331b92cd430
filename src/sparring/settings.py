"""Every trainer's settings type, declared once, with the default the `default` profile runs.

One type per trainer, as TRL has one config per trainer: ``ModelSpec`` (``build_model``), ``SFTSettings``
(``train_sft``), ``AgentSFTSettings`` (DA0's ``warm_start``), ``SimulatorSFTSettings`` (``train_simulator``),
``SimulatorRLSettings`` (``train_simulator_rl``), ``GRPOSettings`` (``train_side``), ``CoevolutionSettings``
(``run_cycle``). ``sparring.params`` uses them as params.yaml's sections of the same names, so the library,
params.yaml and MLflow read the same fields, and a value is validated once, where it is loaded. The run's ``seed``
is not a setting: trainers take it as an argument. This module imports no torch, so loading params stays fast.

Over 400 lines: every trainer's settings type in one place, as params.yaml lists its sections side by side.
"""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

Opponent = Literal["coop", "coopsim", "camo", "ref", "advpool"]  # held-out opponents (evaluate.heldout)


class Settings(BaseModel):
    """Frozen, strict values (pydantic): a typo or a wrong type is refused where the value is written."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes``, validated as the original was."""
        return type(self).model_validate({**self.model_dump(), **changes})


class ModelSpec(Settings):
    """params.yaml's `model`: what every trained policy starts from, a tiny model built from config (the default,
    ~1.5M parameters) or a pretrained one (``name_or_path``), either wrapped in a LoRA adapter when ``lora`` is set."""

    arch: Literal["llama", "qwen2", "gpt_neox"] = Field("llama", description="config family of a from-config model")
    hidden_size: int = Field(128, ge=8, description="width of a model built from config")
    num_layers: int = Field(4, ge=1, description="decoder layers")
    num_heads: int = Field(4, ge=1, description="attention heads; divides hidden_size")
    num_kv_heads: int = Field(2, ge=1, description="key/value heads (grouped-query attention); divides num_heads")
    intermediate_size: int = Field(512, ge=8, description="MLP width")
    max_position_embeddings: int = Field(4096, ge=128, description="longest sequence the model can read")
    tie_word_embeddings: bool = Field(True, description="output layer = input embedding")
    name_or_path: str | None = Field(None, description="a local folder, a hub id or smollm2-135m-instruct: pretrained")
    load_kwargs: dict[str, Any] | None = Field(None, description="extra from_pretrained arguments, e.g. gguf_file")
    lora: dict[str, Any] | None = Field(None, description="peft LoraConfig arguments; null: train every weight")
    dtype: Literal["float32", "bfloat16", "float16"] = Field("float32", description="weights' dtype")

    @model_validator(mode="after")
    def _check(self) -> ModelSpec:
        if self.hidden_size % self.num_heads or self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"hidden_size ({self.hidden_size}) must divide by num_heads ({self.num_heads}), "
                f"which must divide by num_kv_heads ({self.num_kv_heads})"
            )
        return self


class SFTSettings(Settings):
    """One SFT run (TRL's SFTConfig, the fields sparring sets); each phase of a warm start is one of these."""

    epochs: float = Field(6.0, gt=0, description="passes over the conversations (unless max_steps > 0)")
    max_steps: int = Field(-1, ge=-1, description="optimizer steps; > 0 overrides epochs")
    learning_rate: float = Field(2e-3, gt=0, le=1, description="peak learning rate")
    batch_size: int = Field(32, ge=1, description="conversations per optimizer step")
    warmup_steps: int = Field(100, ge=0, description="linear warmup; a tiny model from scratch needs ~100")
    adam_beta2: float = Field(0.98, gt=0, lt=1, description="Adam's beta2 (TRL's 0.999 trained ~20 points worse)")
    weight_decay: float = Field(0.01, ge=0, description="AdamW weight decay")
    lr_scheduler: str = Field("cosine", description="transformers' lr_scheduler_type")
    max_length: int = Field(2048, ge=32, description="tokens kept of each conversation")
    assistant_only_loss: bool = Field(True, description="loss on the trained side's turns only, else on every token")
    group_by_length: bool = Field(True, description="batches of similar length (random batches padded 5.6x)")
    logging_steps: int = Field(10, ge=1, description="steps between logged curve points")
    fused_head: bool = Field(
        True,
        description="TRL's fused LM head (false: on CPU, dense logits of the labelled positions; faster, unproven)",
    )


class AgentSFTSettings(Settings):
    """params.yaml's `agent_sft`: DA0, the agent's warm start, in two SFT phases (:func:`warm_start`)."""

    demos: int = Field(1000, ge=1, description="expert episodes vs cooperative customers (capped by train scenarios)")
    intent: SFTSettings | None = Field(
        SFTSettings(epochs=8, batch_size=32, learning_rate=2e-3, max_length=256, assistant_only_loss=False),
        description="phase 1: every train utterance -> <intent>NAME, loss on the whole text (null: skip)",
    )
    sft: SFTSettings = Field(
        SFTSettings(epochs=10, batch_size=4, learning_rate=1e-3), description="phase 2: the expert demonstrations"
    )
    intent_rehearsal: int = Field(4000, ge=0, description="phase 1 exchanges replayed among phase 2's demos")
    recovery: float = Field(
        0.0, ge=0.0, le=1.0, description="share of demo scenarios replayed as a recovery from a wrong confirmation"
    )
    system_prompt: bool = Field(False, description="the agent reads chat.AGENT_SYSTEM_PROMPT first, everywhere")
    tie_word_embeddings: bool | None = Field(None, description="the agent's model.tie_word_embeddings (null: model's)")
    object_refs: Literal["described", "id"] = Field("described", description="how demos name the object acted on")
    eval_scenarios: int = Field(240, ge=1, description="held-out scenarios DA0 is measured on")
    max_new_tokens: int = Field(96, ge=8, description="per agent message in DA0's evaluation")


class SimulatorSFTSettings(Settings):
    """params.yaml's `simulator_sft`: TRACER stage 1, two drills for a model from config, then SFT
    (:func:`train_simulator`)."""

    scripted_episodes: int = Field(600, ge=0, description="expert episodes: giving identity when asked, and endings")
    scripted_endings: Literal["resolved", "persona"] = Field(
        "resolved", description="scripted episodes all end resolved, or at each persona's real rates (#58)"
    )
    openings: int | None = Field(1000, ge=0, description="ingested utterances used as one-turn openings (null: all)")
    copy_drill: SFTSettings | None = Field(
        SFTSettings(max_steps=2500, batch_size=8, learning_rate=2e-3, warmup_steps=25, max_length=512),
        description="phase 0, a model from config: utterance -> the same utterance (null: skip)",
    )
    opening_drill: SFTSettings | None = Field(
        SFTSettings(epochs=3, batch_size=32, learning_rate=2e-3, warmup_steps=30, max_length=512),
        description="phase 1, a model from config: every utterance from its intent code alone (null: skip)",
    )
    sft: SFTSettings = Field(
        SFTSettings(epochs=8, learning_rate=3e-3, batch_size=32), description="phase 2: dialogues, openings, episodes"
    )
    eval_scenarios: int = Field(120, ge=1, description="held-out scenarios and dialogues fidelity is measured on")
    max_new_tokens: int = Field(64, ge=8, description="per customer message in the fidelity rollouts")

    @model_validator(mode="after")
    def _check(self) -> SimulatorSFTSettings:
        if self.copy_drill is not None and self.copy_drill.max_steps < 1:
            raise ValueError("copy_drill.max_steps must be >= 1: the drill's exercises are drawn per step")
        return self


class GRPOSettings(Settings):
    """One side's GRPO gym (TRL's GRPOConfig, the fields sparring sets, plus the episode's shape)."""

    num_generations: int = Field(8, ge=2, description="group size G: episodes of one scenario per group")
    scenarios_per_step: int = Field(4, ge=1, description="groups per optimizer step")
    epsilon: float = Field(0.2, gt=0, lt=1, description="PPO-style clip of the ratio")
    epsilon_high: float | None = Field(
        None, gt=0, lt=1, description="upper clip of the ratio, 1 + epsilon_high (DAPO's clip-higher; None: epsilon)"
    )
    num_iterations: int = Field(1, ge=1, description="updates per batch of episodes (GRPO's μ; >1 reaches the clip)")
    dynamic_sampling: int = Field(
        0, ge=0, description="DAPO's dynamic sampling: rounds of fresh groups played in place of zero-spread ones"
    )
    beta: float = Field(0.0, ge=0, description="KL to the starting weights (0: no reference model)")
    loss_type: Literal["grpo", "dapo", "dr_grpo", "bnpo", "cispo", "sapo", "luspo", "vespo"] = Field(
        "dapo", description="TRL's loss normalisation"
    )
    scale_rewards: Literal["group", "batch", "none"] = Field("group", description="std of (GRPO), or none (Dr. GRPO)")
    learning_rate: float = Field(1e-4, gt=0, le=1, description="peak learning rate")
    max_steps: int = Field(15, ge=1, description="optimizer steps")
    max_new_tokens: int = Field(96, ge=1, description="per message of the trained side")
    temperature: float = Field(1.0, gt=0, description="sampling temperature; TRL recomputes logprobs at it")
    max_turns: int = Field(6, ge=1, description="agent turns per episode")
    max_calls_per_turn: int = Field(3, ge=1, description="tool calls per agent turn")
    gradient_accumulation_steps: int = Field(1, ge=1, description="micro-batches per step (same episodes, less memory)")
    warmup_steps: int = Field(0, ge=0, description="linear warmup")
    lr_scheduler: Literal["linear", "constant", "constant_with_warmup", "cosine"] = Field(
        "linear", description="transformers' lr_scheduler_type (linear decays to 0 at max_steps)"
    )
    max_grad_norm: float = Field(1.0, gt=0, description="gradient clipping")
    adam_beta2: float = Field(0.999, gt=0, lt=1, description="Adam's beta2")
    logging_steps: int = Field(1, ge=1, description="steps between logged curve points")
    completion: Literal["episode", "first_turn"] = Field(
        "episode", description="one completion: the whole episode, or (agent) its first turn, rewarded on routing"
    )
    credit: Literal["grpo", "iapo", "mt_grpo"] = Field(
        "grpo", description="per-token credit: uniform (GRPO), influence graph (IAPO), turn + outcome (MT-GRPO)"
    )
    iapo_beta_plus: float = Field(0.05, ge=0, description="IAPO's β₊: how much a success spares error-bearing actions")
    iapo_clip: float = Field(0.25, gt=0, description="IAPO's c: the clip of the standardized influence features")
    rollout_ahead: int = Field(
        0, ge=0, description="groups of a step a forked worker plays during the update before (0: none; the rest here)"
    )

    @model_validator(mode="after")
    def _check(self) -> GRPOSettings:
        batch = self.num_generations * self.scenarios_per_step
        if self.rollout_ahead > self.scenarios_per_step:
            raise ValueError(
                f"rollout_ahead ({self.rollout_ahead}) counts groups of a step: at most scenarios_per_step "
                f"({self.scenarios_per_step})"
            )
        if batch % self.gradient_accumulation_steps:
            raise ValueError(
                f"num_generations x scenarios_per_step ({batch}) must divide by gradient_accumulation_steps"
            )
        return self


class SimulatorRLSettings(Settings):
    """params.yaml's `simulator_rl`: TRACER stage 2, GRPO of the simulator on replayed training sessions against the
    escalating scripted expert, rewarded by the session's ending and its customer-turn trajectory
    (:func:`~sparring.train.tracer.train_simulator_rl`)."""

    grpo: GRPOSettings = Field(
        GRPOSettings(max_new_tokens=64, max_steps=30, beta=0.04),
        description="the simulator's gym (the customer side); its beta, the KL to the SFT simulator, is the guard",
    )
    reward: Literal["hierarchical", "summed"] = Field(
        "hierarchical", description="ending first, trajectory among matched endings; or both group-normalized, summed"
    )
    sessions: int | None = Field(400, ge=1, description="training dialogues replayed (a seeded sample; null: all)")
    outcome_weight: float = Field(1.0, ge=0, description="w_out: the ending match (train.tracer, step 2.3)")
    trajectory_weight: float = Field(1.0, ge=0, description="w_traj: 1 − DTW to the real turns (the same step)")
    faithfulness_weight: float = Field(0.0, ge=0, description="w_faith: the judge's faithfulness, group-normalized")
    realism_weight: float = Field(0.0, ge=0, description="w_real: the judge's realism (P real), group-normalized")
    eval_dialogues: int = Field(120, ge=1, description="held-out sessions and scenarios each simulator is measured on")
    max_new_tokens: int = Field(64, ge=8, description="per customer message in the fidelity rollouts")
    eval_temperature: float = Field(
        1.0, ge=0, le=5, description="sampling temperature of both simulators in the fidelity rollouts (0: greedy)"
    )
    ceiling_draws: int = Field(
        20, ge=0, description="persona-rate draws played for the ending ceiling beside both simulators (0: none)"
    )

    @model_validator(mode="after")
    def _check(self) -> SimulatorRLSettings:
        if not (self.outcome_weight or self.trajectory_weight or self.faithfulness_weight or self.realism_weight):
            raise ValueError(
                "at least one of outcome_weight, trajectory_weight, faithfulness_weight, realism_weight must be > 0"
            )
        return self


# The agent's GRPO recipe that learnt (docs/results.md, "The first long arm"): dynamic sampling at a learning rate
# that does not decay inside the budget. agent_rl runs it for its own steps; the cycles' agent gyms for theirs.
# Three of a step's four groups played ahead balance the cores (docs/results.md, "Rollouts ahead").
AGENT_GRPO = GRPOSettings(
    learning_rate=3e-4, dynamic_sampling=2, lr_scheduler="constant", max_steps=20, rollout_ahead=3
)


class SelfTrainingSettings(Settings):
    """agent_rl's first part: the agent fine-tuned on its own world-verified strict passes on the gym
    (:mod:`sparring.train.self_training`)."""

    rounds: int = Field(2, ge=0, le=10, description="sample-verify-train rounds before GRPO (0: none)")
    samples: int = Field(2, ge=1, le=64, description="episodes per gym scenario a round")
    temperature: float = Field(1.0, gt=0, le=3, description="the agent's sampling temperature")
    keep_per_scenario: int = Field(2, ge=1, description="distinct verified successes kept of each scenario")
    batch: int = Field(160, ge=1, description="episodes played in one call (bounds the memory)")
    mix_demos: int = Field(0, ge=0, description="expert demonstrations on train scenarios mixed into each round")
    corrections: bool = Field(
        True, description="also the expert's turn at each failed state the agent reached (DAgger)"
    )
    intent_rehearsal: int = Field(
        2000, ge=0, description="agent_sft's utterance -> intent exchanges replayed in each round (against forgetting)"
    )
    sft: SFTSettings = Field(
        SFTSettings(epochs=2, learning_rate=2e-4, batch_size=4, warmup_steps=10, max_length=2048),
        description="the fine-tuning on them (loss on the agent's turns)",
    )


class AgentRLSettings(Settings):
    """params.yaml's `agent_rl`: RL-ADA's step 1, DA0 -> DA1 by multi-turn GRPO on the unplayed gym with
    ``coevolution.agent_grpo``'s recipe, keeping the last step or the one best on validation scenarios
    (:mod:`sparring.train.agent_rl`)."""

    self_training: SelfTrainingSettings = Field(SelfTrainingSettings(), description="before GRPO: on verified passes")
    max_steps: int = Field(0, ge=0, description="GRPO steps (replaces coevolution.agent_grpo.max_steps; 0: none)")
    eval_every: int = Field(20, ge=1, description="steps between validation plays (and resumable checkpoints)")
    validation_scenarios: int = Field(64, ge=1, description="validation scenarios played at each check (greedy)")
    gym: Literal["unplayed", "train"] = Field(
        "unplayed", description="the gym's scenarios: openings no demonstration played (gym.jsonl), or the train set"
    )
    keep: Literal["last", "best"] = Field("last", description="DA1: the last step, or the step best on validation")

    @model_validator(mode="after")
    def _check(self) -> AgentRLSettings:
        if self.max_steps and self.eval_every > self.max_steps:
            raise ValueError(f"eval_every ({self.eval_every}) must be <= max_steps ({self.max_steps})")
        return self


class CoevolutionSettings(Settings):
    """params.yaml's `coevolution`: RL-ADA's cycles, one pipeline stage per cycle."""

    agent_grpo: GRPOSettings = Field(AGENT_GRPO, description="the agent's gym; its turn limits shape every episode")
    adversary_grpo: GRPOSettings = Field(
        GRPOSettings(max_new_tokens=64, rollout_ahead=3),
        description="the adversary's gym; its tokens and temperature every customer's",
    )
    arena_scenarios: int = Field(24, ge=1, description="arena.jsonl scenarios per arena (neither side trains on them)")
    arena_runs: int = Field(2, ge=1, description="times each arena scenario is played")
    gym_scenarios: int = Field(32, ge=1, description="scenarios a gym samples its groups from")
    replay_share: float = Field(0.5, ge=0, le=1, description="of them, replayed from recent arena transcripts")
    replay_failure_share: float = Field(0.7, ge=0, le=1, description="of the replayed, the trained side's losses")
    agent_gym: Literal["train", "unplayed"] = Field(
        "unplayed", description="the agent gym's fresh scenarios: the training ones or scenarios' unplayed gym.jsonl"
    )
    max_transcripts: int = Field(512, ge=0, description="recent arena transcripts carried from cycle to cycle")
    agent_mix: dict[Literal["adversary", "pool", "ref", "coop"], float] = Field(
        {"adversary": 0.5, "pool": 0.25, "coop": 0.25},
        description="the agent gym's opponents (current, earlier generations, generation 0, cooperative): a league",
    )
    agent_recipe: Literal["grpo", "self_training"] = Field(
        "grpo", description="the agent gym's trainer: GRPO (agent_grpo) or agent_rl's self-training with corrections"
    )
    agent_self_training: SelfTrainingSettings = Field(
        SelfTrainingSettings(rounds=1), description="with agent_recipe self_training: the agent gym's rounds"
    )
    self_training_scenarios: int = Field(
        320, ge=1, description="with agent_recipe self_training: scenarios its gym draws (replayed share included)"
    )
    simulator: Literal["sft", "rl"] = Field(
        "sft", description="the cooperative customer and the adversaries' start: TRACER stage 1 or 2's checkpoint"
    )
    adversary_init: Literal["simulator", "current"] = Field("simulator", description="where a new generation starts")
    adversary_opening: Literal["utterance", "own"] = Field(
        "utterance", description="adversaries go on from the scenario's utterance, or write their opening whole"
    )
    coop_temperature: float = Field(0.0, ge=0, le=5, description="the simulator as `_coop` (0: greedy)")
    coop_opening: Literal["utterance", "simulator"] = Field(
        "utterance", description="`_coop` opens with the scenario's utterance, or the simulator's own words"
    )
    train: Literal["behind", "weaker", "agent", "adversary"] = Field(
        "behind", description="behind: the side that lost more ground since the last arena; weaker: the lower rate"
    )
    eval_scenarios: int = Field(24, ge=0, description="held-out scenarios per opponent after each cycle (0: none)")
    w_da_gate: float = Field(0.6, ge=0, le=1, description="stop rule: W_DA >= gate ...")
    stability: float = Field(0.05, ge=0, le=1, description="... and |ΔW_DA| <= stability ...")
    window: int = Field(2, ge=1, description="... over this many consecutive cycles")
    max_cycles: int = Field(4, ge=1, le=64, description="or this many cycles ran")

    @model_validator(mode="after")
    def _check(self) -> CoevolutionSettings:
        if any(w < 0 for w in self.agent_mix.values()) or sum(self.agent_mix.values()) <= 0:
            raise ValueError("agent_mix weights must be non-negative and not all zero")
        if self.adversary_grpo.completion != "episode":
            raise ValueError("adversary_grpo.completion must be episode: first_turn windows are the agent's")
        if self.adversary_grpo.credit == "mt_grpo":
            raise ValueError("adversary_grpo.credit mt_grpo: its turn reward is the agent's routing (grpo or iapo)")
        if self.agent_recipe == "self_training" and self.agent_self_training.rounds == 0:
            raise ValueError("agent_recipe self_training needs agent_self_training.rounds >= 1 (0 trains nothing)")
        return self


# The cohort members' warm start: DA0's recipe on fewer demos and epochs (they only route; peer_rl trains routing).
MEMBER_WARM_START = AgentSFTSettings(
    demos=300,
    intent=SFTSettings(epochs=3, batch_size=32, learning_rate=2e-3, max_length=256, assistant_only_loss=False),
    intent_rehearsal=1500,
    sft=SFTSettings(epochs=3, batch_size=4),
)


class PeerMember(Settings):
    """One member of the peer-reward cohort: the final co-evolved agent, or a model spec warm-started as DA0 was."""

    model: ModelSpec | None = Field(None, description="a model built from this spec (null: the final co-evolved agent)")
    warm_start: AgentSFTSettings | None = Field(None, description="its warm start (null: params' agent_sft)")
    demos: bool = Field(True, description="run the warm start's phase 2 (expert demos); false: the intent phase alone")
    name_rows: Literal["resize", "words"] = Field(
        "resize", description="a pretrained member's added name tokens start at the resize's init, or their words' mean"
    )


class CotrainSettings(Settings):
    """peer_rl's `cotrain` (reward: cohort): co-training by the cohort's joint vote (train/peer_cotrain.py)."""

    views: Literal["all", "others"] = Field(
        "all", description="whose distributions a learner's label multiplies: every member's, or the others' only"
    )
    keep: float = Field(0.7, gt=0, le=1, description="share of the pool labelled, the joint vote's most confident")
    rounds: int = Field(1, ge=1, description="times the labels are made from the members' current weights")
    learners: list[str] | None = Field(["final"], description="the members that train (null: every member)")
    loss: Literal["sft", "exact"] = Field(
        "sft",
        description="how a learner learns its labels: cross-entropy beside the expert's demonstrations (sft), or the "
        "expected agreement of its routing alone (exact: peer_rl.exact's trainer)",
    )
    demos: int = Field(600, ge=0, description="expert demonstrations on train scenarios mixed in under sft")
    demo_customers: list[Literal["cooperative", "camouflaging"]] = Field(
        ["cooperative", "camouflaging"],
        min_length=1,
        description="the scripted customers the expert plays each demo scenario against",
    )
    sft: SFTSettings = Field(
        SFTSettings(
            epochs=1,
            learning_rate=3e-4,
            batch_size=4,
            warmup_steps=20,
            adam_beta2=0.98,
            weight_decay=0.01,
            max_length=2048,
        ),
        description="each learner's fine-tune per round under sft (agent_sft's phase 2: one epoch, a third of its lr)",
    )

    @model_validator(mode="after")
    def _check(self) -> CotrainSettings:
        if self.loss == "sft" and self.demos == 0:
            raise ValueError("loss sft keeps the agent's conversations with the expert's demos: demos must be > 0")
        return self


class PeerRewardSettings(Settings):
    """params.yaml's `peer_rl`: Co-RL (:mod:`sparring.train.peer_reward`), a cohort rewarding each other's routing."""

    members: dict[str, PeerMember] = Field(
        {
            "final": PeerMember(),
            "qwen": PeerMember(
                model=ModelSpec(arch="qwen2", hidden_size=96, num_layers=4, num_heads=4, intermediate_size=384),
                warm_start=MEMBER_WARM_START,
            ),
            "neox": PeerMember(
                model=ModelSpec(arch="gpt_neox", hidden_size=128, num_layers=3, num_heads=4, intermediate_size=512),
                warm_start=MEMBER_WARM_START,
            ),
        },
        description="the cohort, in ring order; `final` is the last cycle's agent",
    )
    reward: Literal["ring", "majority", "self", "teacher", "graded", "distill", "cohort"] = Field(
        "cohort",
        description="agreement with the next member's vote, the others' majority, one's own (TTRL), the teacher's; "
        "exact only: the teacher's probability of the answer (graded), reverse KL to the teacher (distill), the "
        "cohort's joint vote (cohort: co-training, `cotrain`)",
    )
    estimate: Literal["sampled", "exact"] = Field(
        "exact",
        description="the reward's expectation from G sampled routings (GRPO), or exactly over the intents "
        "(train/peer_expectation.py; teacher, graded and distill only)",
    )
    exact: SFTSettings = Field(
        SFTSettings(
            max_steps=1200,
            batch_size=16,
            learning_rate=1e-3,
            warmup_steps=0,
            lr_scheduler="linear",
            adam_beta2=0.999,
            weight_decay=0.0,
            group_by_length=False,
            max_length=256,
        ),
        description="each learner's trainer under `estimate: exact` (batch_size = utterances per step)",
    )
    teacher: str | None = Field(
        None, description="under `teacher`, the member whose votes label the pool (null: the best on the probe)"
    )
    cotrain: CotrainSettings = Field(CotrainSettings(), description="under `cohort`: the joint vote and its refresh")
    measure_from: Literal["pool", "splits"] = Field(
        "pool",
        description="labelled utterances measure and probe read: held out of the pool (its labels measure only; "
        "never trained on) or the test / validation splits",
    )
    grpo: GRPOSettings = Field(
        GRPOSettings(
            num_generations=8,
            scenarios_per_step=16,
            max_steps=40,
            learning_rate=5e-5,
            max_new_tokens=2,
            max_turns=1,
            max_calls_per_turn=1,
            completion="first_turn",
        ),
        description="each member's GRPO (scenarios_per_step = utterances per step; 2 tokens: <intent> NAME)",
    )
    pool: int = Field(10000, ge=1, description="unlabeled utterances trained on (the first of the shuffled pool)")
    probe: int = Field(200, ge=1, description="labelled utterances of the diversity probe (see measure_from)")
    measure: int = Field(1000, ge=1, description="labelled utterances before/after are measured on (see measure_from)")
    collapse_window: int = Field(64, ge=1, description="the collapse guard reads a member's last this many votes")
    collapse_entropy: float = Field(1.0, ge=0, description="stop a member whose votes' entropy (nats) falls below")
    collapse_share: float = Field(0.5, gt=0, le=1, description="... or whose most frequent vote exceeds this share")

    @property
    def teacher_reward(self) -> bool:
        """Whether one member (the teacher) labels the pool and the others learn from it, untrained itself."""
        return self.reward in ("teacher", "graded", "distill")

    @model_validator(mode="after")
    def _check(self) -> PeerRewardSettings:
        if len(self.members) < 2 and self.reward not in ("self", "cohort"):  # a cohort of one: self-training
            raise ValueError(f"reward {self.reward!r} needs at least 2 members, got {list(self.members)}")
        odd = [name for name, m in self.members.items() if (m.model is None) != (name == "final")]
        if odd:
            raise ValueError(f"members {odd}: the member without a model is the final agent, named 'final'")
        if self.grpo.completion != "first_turn":
            raise ValueError("peer_rl.grpo.completion must be first_turn: a member's episode is its first message")
        if self.teacher is not None and self.teacher not in self.members:
            raise ValueError(f"teacher {self.teacher!r} is not one of the members {list(self.members)}")
        exact_rewards = ("teacher", "graded", "distill", "cohort")
        if self.estimate == "exact" and self.reward not in exact_rewards:
            raise ValueError(f"peer_rl.estimate exact takes a teacher's reward {exact_rewards}, not {self.reward!r}")
        unknown = sorted(set(self.cotrain.learners or []) - set(self.members))
        if unknown and self.reward == "cohort":
            raise ValueError(f"peer_rl.cotrain.learners {unknown} are not members of the cohort {list(self.members)}")
        if self.estimate == "sampled" and self.reward in ("graded", "distill", "cohort"):
            raise ValueError(f"peer_rl.reward {self.reward!r} needs estimate: exact")
        return self

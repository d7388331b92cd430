"""The LLM-judge backend: any causal LM answers a rubric question with Yes or No; the score is
P(Yes) / (P(Yes) + P(No)) at the answer position. Same interface as the trained backend, for the scale profile
where a pretrained model is at hand (the trained MiniLM + scikit-learn backend is the CPU default).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from sparring.judge.oracle import intent_named_outright, join_turns
from sparring.world.taxonomy import load_taxonomy

FAITHFUL_RUBRIC = (
    "You check bank support chats. Read the customer's messages and decide whether the customer's real request "
    "is: {description}\n\nCustomer messages:\n{turns}\n\nIs that the customer's real request? Answer Yes or No.\n"
    "Answer:"
)
REALISM_RUBRIC = (
    "You check bank support chats. Read the customer's messages and decide whether a real person wrote them "
    "to their bank's support chat (natural, coherent, plausible), rather than a broken or robotic generator.\n\n"
    "Customer messages:\n{turns}\n\nDid a real customer write these? Answer Yes or No.\nAnswer:"
)


def _answer_tokens(tokenizer: Any) -> tuple[list[int], int, int]:
    """(shared prefix, Yes id, No id): ' Yes' and ' No' as the model would write them after 'Answer:'.

    Small tokenizers may split off the space first; that shared prefix is appended to every prompt so the
    two answers are compared at the token where they differ."""
    yes = tokenizer.encode(" Yes", add_special_tokens=False)
    no = tokenizer.encode(" No", add_special_tokens=False)
    n = 0
    while n < min(len(yes), len(no)) and yes[n] == no[n]:
        n += 1
    if n == len(yes) or n == len(no):
        raise ValueError("the tokenizer cannot tell ' Yes' from ' No' by a token")
    return yes[:n], yes[n], no[n]


class LLMJudgeBackend:
    def __init__(self, model: Any, tokenizer: Any, batch_size: int = 8, max_length: int = 1024):
        self.model, self.tokenizer = model.eval(), tokenizer
        self.batch_size, self.max_length = batch_size, max_length
        self.prefix, self.yes, self.no = _answer_tokens(tokenizer)

    @torch.no_grad()
    def yes_probability(self, prompts: Sequence[str]) -> np.ndarray:
        """P(Yes) / (P(Yes) + P(No)) for the token after each prompt, batched with left padding."""
        out = []
        side = self.tokenizer.padding_side
        self.tokenizer.padding_side = "left"  # the answer position is then the last one in every row
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        try:
            for i in range(0, len(prompts), self.batch_size):
                batch = self.tokenizer(
                    list(prompts[i : i + self.batch_size]),
                    return_tensors="pt",
                    padding=True,
                    truncation=True,
                    max_length=self.max_length,
                )
                ids, mask = batch["input_ids"], batch["attention_mask"]
                if self.prefix:
                    tail = torch.tensor(self.prefix).expand(ids.shape[0], -1)
                    ids, mask = torch.cat([ids, tail], 1), torch.cat([mask, torch.ones_like(tail)], 1)
                device = self.model.device
                logits = self.model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits[:, -1].float()
                pair = torch.log_softmax(logits[:, [self.yes, self.no]], dim=-1)
                out.append(pair[:, 0].exp().cpu().numpy())
        finally:
            self.tokenizer.padding_side = side
        return np.concatenate(out) if out else np.zeros(0)

    def faithfulness(self, customer_turns: Sequence[Sequence[str]], intents: Sequence[str]) -> np.ndarray:
        taxonomy = load_taxonomy()
        prompts = [
            FAITHFUL_RUBRIC.format(description=taxonomy.intents[i].description, turns=join_turns(t) or "(none)")
            for t, i in zip(customer_turns, intents, strict=True)
        ]
        scores = self.yes_probability(prompts)
        return np.where([bool(t) for t in customer_turns], scores, 0.0)

    def realism(self, customer_turns: Sequence[Sequence[str]]) -> np.ndarray:
        prompts = [REALISM_RUBRIC.format(turns=join_turns(t) or "(none)") for t in customer_turns]
        scores = self.yes_probability(prompts)
        return np.where([bool(t) for t in customer_turns], scores, 0.0)

    def named_outright(self, text: str, intent: str) -> bool:
        return intent_named_outright(text, intent)

"""Chat format, call parser and tokenizer: round trips, robustness, template and masks."""

from __future__ import annotations

import json
import random

import pytest
from transformers import AutoTokenizer

from sparring.lm.chat import (
    ASSISTANT,
    CALL_CLOSE,
    CALL_MARKERS,
    CALL_OPEN,
    CHAT_TEMPLATE,
    END_OF_TEXT,
    END_OF_TURN,
    INTENT,
    PAD,
    ROLE_MARKERS,
    SPECIAL_TOKENS,
    SYSTEM,
    TOOL,
    USER,
    ParsedCall,
    ParsedMessage,
    assistant_message,
    known_intents,
    known_tools,
    parse_agent_message,
    render_agent_message,
    render_call,
    swap_roles,
)
from sparring.lm.tokenizer import end_of_turn_id, train_tokenizer

INTENTS = sorted(known_intents())
TOOLS = sorted(known_tools())

SAMPLE_ARGS: dict[str, dict] = {
    "lookup_account": {},
    "card_services": {"action": "track_delivery", "card_id": "card-0007"},
    "dispute_charge": {"transaction_id": "tx-0042", "reason": "duplicate"},
    "transfer_support": {"action": "trace", "transfer_id": "tr-0003"},
    "top_up_support": {"action": "auto_top_up", "threshold": 20, "amount": 50.5},
    "cash_services": {"action": "report_retained", "card_id": "card-0001"},
    "identity_verification": {"action": "start"},
    "account_settings": {"action": "change_detail", "field": "email", "value": "ana@example.com"},
    "fees_and_rates": {"topic": "exchange_rate"},
    "end_conversation": {"resolution": "Card tracked — arrives Friday ✓ <ok> & 'done'"},
    "transfer_to_human": {"reason": "Customer asked for a person."},
}
SHAPES = [
    ("", None),
    ("Sure, one moment.", None),
    ("", "card_arrival"),
    ("Let me check.", "reverted_card_payment?"),
]


def sample_call(tool: str) -> ParsedCall:
    return ParsedCall(tool, dict(SAMPLE_ARGS.get(tool, {"x": 1})))


def conversation() -> list[dict]:
    return [
        {"role": "system", "content": "You are a support agent for a bank."},
        {"role": "user", "content": "My new card still hasn't arrived."},
        assistant_message("Let me check.", ParsedCall("lookup_account", {}), "card_arrival"),
        {"role": "tool", "content": '{"cards": [{"card_id": "card-0007", "status": "shipped"}]}'},
        assistant_message("It ships today.", sample_call("card_services"), "card_arrival"),
        {"role": "tool", "content": '{"ok": true, "eta": "Friday"}'},
        assistant_message("It arrives on Friday. Anything else?", intent="card_arrival"),
        {"role": "user", "content": "No, thanks!"},
        assistant_message("", sample_call("end_conversation"), "card_arrival"),
    ]


def corpus() -> list[str]:
    rng = random.Random(0)
    subjects = ["card", "transfer", "top-up", "refund", "payment", "account", "PIN", "withdrawal"]
    problems = ["has not arrived", "was declined", "is pending", "failed", "was charged twice", "is wrong"]
    openers = ["Hi,", "Hello,", "Excuse me,", "Help!", "Good morning,", ""]
    texts = []
    for _ in range(300):
        s, p = rng.choice(subjects), rng.choice(problems)
        amount, day = rng.randint(1, 99), rng.randint(1, 28)
        texts.append(f"{rng.choice(openers)} my {s} {p}. It was {amount} pounds on day {day}.")
        tool = rng.choice(TOOLS)
        texts.append(render_agent_message(f"I can help with your {s}.", sample_call(tool), rng.choice(INTENTS)))
        texts.append(json.dumps({"ok": True, "id": f"tx-{rng.randint(0, 9999):04d}", "status": p}))
    return texts


@pytest.fixture(scope="module")
def tok():
    return train_tokenizer(corpus(), vocab_size=700, intents=INTENTS)


@pytest.fixture(scope="module")
def reloaded(tok, tmp_path_factory):
    path = tmp_path_factory.mktemp("tok")
    tok.save_pretrained(path)
    return AutoTokenizer.from_pretrained(path)


# --------------------------------------------------------------------------------------------- parser


@pytest.mark.parametrize("tool", TOOLS)
def test_parse_render_round_trip_every_tool(tool):
    call = sample_call(tool)
    for text, intent in SHAPES:
        rendered = render_agent_message(text, call, intent)
        parsed = parse_agent_message(rendered)
        assert parsed == ParsedMessage(text=text, call=call, intent=intent, format_ok=True, error=None)
        assert rendered.endswith(render_call(parsed.call))
        assert render_agent_message(parsed.text, parsed.call, parsed.intent) == rendered


def test_parse_without_call_and_decoded_stop_tokens():
    assert parse_agent_message("Hello there.") == ParsedMessage("Hello there.", None, None, True)
    p = parse_agent_message("<intent>pin_blocked I can unblock it." + END_OF_TURN + PAD + PAD)
    assert (p.text, p.intent, p.call, p.format_ok) == ("I can unblock it.", "pin_blocked", None, True)


@pytest.mark.parametrize(
    "raw, fragment",
    [
        ("", "empty"),
        ("Sure.<call>lookup_account {}", "expected one"),
        ("Sure.</call>lookup_account {}<call>", "before"),
        ("<call>a {}</call><call>b {}</call>", "expected one"),
        ('<call>lookup_account {"a": }</call>', "not valid JSON"),
        ("<call>lookup_account [1, 2]</call>", "JSON object"),
        ("<call>lookup_account</call>", "missing JSON"),
        ('<call>lookup_account {"a": NaN}</call>', "not valid JSON"),
        ("<call>launch_rocket {}</call>", "unknown tool"),
        ("<call> {}</call>", "without a tool name"),
        ("<call>lookup_account {}</call> and more", "text after"),
        ("<intent>not_an_intent Hi", "unknown intent"),
        ("<intent>", "without an intent name"),
        ("Hi <intent>card_arrival", "must open"),
        ("<intent>card_arrival<intent>pin_blocked Hi", "2 <intent>"),
        ("Hi<|user|>I am the customer now", "<|user|>"),
        ("<call>lookup_account " + "[" * 100_000 + "</call>", "lookup_account"),
        ('<call>lookup_account {"n": ' + "9" * 5000 + "}</call>", "not valid JSON"),
    ],
)
def test_parse_rejects_malformed(raw, fragment):
    p = parse_agent_message(raw)
    assert not p.format_ok and fragment in p.error


def test_parse_salvages_parts():
    p = parse_agent_message('<intent>card_arrival Checking.<call>lookup_account {"a": </call>')
    assert (p.intent, p.text, p.call, p.format_ok) == ("card_arrival", "Checking.", None, False)
    p = parse_agent_message("<intent>card_arrival Done.<call>lookup_account {}</call> Bye.")
    assert (p.intent, p.text, p.call, p.format_ok) == (
        "card_arrival",
        "Done.",
        ParsedCall("lookup_account"),
        False,
    )
    p = parse_agent_message("<intent>card_arrivalSorry to hear that.")
    assert (p.intent, p.text, p.format_ok) == ("card_arrival", "Sorry to hear that.", False)
    assert parse_agent_message(None).format_ok is False  # type: ignore[arg-type]
    custom = parse_agent_message("<intent>x1<call>t1 {}</call>", tools={"t1"}, intents={"x1"})
    assert custom.format_ok and custom.call == ParsedCall("t1", {}) and custom.intent == "x1"


def test_parser_never_raises_on_garbage():
    rng = random.Random(1234)
    bits = '{ } [ ] " : , null NaN 1e999 \\ \\u é x < > | {"a":1}'.split()
    soup = [*SPECIAL_TOKENS, *CALL_MARKERS, *TOOLS[:4], *INTENTS[:4], *bits, " ", "\n", "\ud800"]
    canon = [render_agent_message(t, sample_call(tool), i) for tool in TOOLS for t, i in SHAPES]
    for n in range(2000):
        kind = n % 4
        if kind == 0:
            raw = rng.randbytes(rng.randint(0, 200)).decode("utf-8", errors=rng.choice(["replace", "ignore"]))
        elif kind == 1:
            raw = "".join(rng.choice(soup) for _ in range(rng.randint(0, 40)))
        elif kind == 2:
            c = rng.choice(canon)
            raw = c[: rng.randint(0, len(c))]
        else:
            raw = "".join(chr(rng.randrange(0x110000)) for _ in range(rng.randint(0, 50)))
        p = parse_agent_message(raw)
        assert isinstance(p, ParsedMessage) and isinstance(p.text, str)
        assert p.format_ok == (p.error is None)
        assert p.call is None or (p.call.name in TOOLS and isinstance(p.call.arguments, dict))
        assert p.intent is None or p.intent in INTENTS


# ------------------------------------------------------------------------------------------ tokenizer


def test_template_uses_the_marker_constants():
    for marker in [SYSTEM, USER, ASSISTANT, TOOL, END_OF_TURN, *CALL_MARKERS]:
        assert marker in CHAT_TEMPLATE


def test_tokenizer_save_and_reload(tok, reloaded):
    assert len(tok) <= 700
    for t in (tok, reloaded):
        assert t.chat_template == CHAT_TEMPLATE
        assert t.padding_side == "left"
        assert (t.pad_token, t.bos_token, t.eos_token) == (PAD, END_OF_TEXT, END_OF_TURN)
        assert t.pad_token_id == 0
        assert set(SPECIAL_TOKENS) <= set(t.all_special_tokens)
        assert end_of_turn_id(t) == t.eos_token_id == t.convert_tokens_to_ids(END_OF_TURN)
        added = {a.content: a for a in t.added_tokens_decoder.values()}
        for name in [*INTENTS, *TOOLS]:
            assert added[name].lstrip and not added[name].special
        for marker in CALL_MARKERS:
            assert not added[marker].special
        for marker in SPECIAL_TOKENS:
            assert added[marker].special
    assert tok.get_vocab() == reloaded.get_vocab()
    text = tok.apply_chat_template(conversation(), tokenize=False)
    assert reloaded.apply_chat_template(conversation(), tokenize=False) == text
    assert reloaded(text)["input_ids"] == tok(text)["input_ids"]


def test_too_small_vocab_is_refused():
    with pytest.raises(ValueError, match="no room"):
        train_tokenizer(["hello"], vocab_size=300, intents=INTENTS)


def test_intent_and_tool_names_are_single_tokens(tok):
    intent_id, call_id = tok.convert_tokens_to_ids(INTENT), tok.convert_tokens_to_ids(CALL_OPEN)
    quote = tok.encode('"', add_special_tokens=False)
    for name in [*INTENTS, *TOOLS]:
        name_id = tok.convert_tokens_to_ids(name)
        assert tok.encode(INTENT + name, add_special_tokens=False) == [intent_id, name_id]
        assert tok.encode(CALL_OPEN + name + " {}", add_special_tokens=False)[:2] == [call_id, name_id]
        assert tok.encode(f'"{name}"', add_special_tokens=False) == [*quote, name_id, *quote]


def test_chat_template_renders_and_round_trips(tok):
    messages = conversation()
    text = tok.apply_chat_template(messages, tokenize=False)
    assert text == (
        "<|system|>You are a support agent for a bank.<|end|>"
        "<|user|>My new card still hasn't arrived.<|end|>"
        "<|assistant|><intent>card_arrival Let me check.<call>lookup_account {}</call><|end|>"
        '<|tool|>{"cards": [{"card_id": "card-0007", "status": "shipped"}]}<|end|>'
        '<|assistant|><intent>card_arrival It ships today.<call>card_services {"action": "track_delivery", '
        '"card_id": "card-0007"}</call><|end|>'
        '<|tool|>{"ok": true, "eta": "Friday"}<|end|>'
        "<|assistant|><intent>card_arrival It arrives on Friday. Anything else?<|end|>"
        "<|user|>No, thanks!<|end|>"
        "<|assistant|><intent>card_arrival<call>end_conversation "
        + json.dumps(SAMPLE_ARGS["end_conversation"], ensure_ascii=False)
        + "</call><|end|>"
    )
    ids = tok.apply_chat_template(messages, tokenize=True, return_dict=True)["input_ids"]
    assert ids == tok(text, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == text
    prompt = tok.apply_chat_template(messages[:2], tokenize=False, add_generation_prompt=True)
    assert prompt.endswith(USER + "My new card still hasn't arrived." + END_OF_TURN + ASSISTANT)


def test_template_assistant_turn_matches_render_agent_message(tok):
    for tool in TOOLS:
        for text, intent in SHAPES:
            msg = assistant_message(text, sample_call(tool), intent)
            expected = ASSISTANT + render_agent_message(text, sample_call(tool), intent) + END_OF_TURN
            assert tok.apply_chat_template([msg], tokenize=False) == expected
    as_string = {
        "role": "assistant",
        "content": " Hi ",
        "tool_calls": [{"type": "function", "function": {"name": "x", "arguments": '{"a": 1}'}}],
    }
    assert tok.apply_chat_template([as_string], tokenize=False) == ASSISTANT + 'Hi<call>x {"a": 1}</call>' + END_OF_TURN
    tool_dict = {"role": "tool", "content": {"ok": True}}
    assert tok.apply_chat_template([tool_dict], tokenize=False) == TOOL + '{"ok": true}' + END_OF_TURN
    with pytest.raises(Exception, match="unknown chat role"):
        tok.apply_chat_template([{"role": "robot", "content": "beep"}], tokenize=False)


def test_decoding_completions_keeps_call_and_intent(tok):
    completion = render_agent_message("Let me check.", sample_call("dispute_charge"), "transaction_charged_twice")
    ids = tok(completion + END_OF_TURN, add_special_tokens=False)["input_ids"]
    decoded = tok.decode(ids, skip_special_tokens=True)  # what TRL hands the reward functions
    assert decoded == completion
    assert parse_agent_message(decoded).format_ok
    assert parse_agent_message(tok.decode(ids)).format_ok


def test_assistant_mask_covers_exactly_assistant_turns(tok):
    messages = conversation()
    out = tok.apply_chat_template(messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    # Turns meet at special tokens, so each turn tokenizes alone exactly as in context.
    want_ids: list[int] = []
    want_mask: list[int] = []
    for m in messages:
        marker = ROLE_MARKERS[m["role"]]
        body = tok.apply_chat_template([m], tokenize=False)[len(marker) :]
        body_ids = tok(body, add_special_tokens=False)["input_ids"]
        want_ids += [tok.convert_tokens_to_ids(marker), *body_ids]
        want_mask += [0] + [int(m["role"] == "assistant")] * len(body_ids)
    assert out["input_ids"] == want_ids
    assert out["assistant_masks"] == want_mask
    # The stop token is trained: the last masked token of each assistant turn is <|end|>.
    eot = end_of_turn_id(tok)
    assert sum(1 for i, k in zip(want_ids, want_mask, strict=True) if k and i == eot) == 4


def test_generation_prompt_is_a_token_prefix(tok):
    messages = conversation()
    for k, m in enumerate(messages):
        if m["role"] == "assistant":
            prompt = tok.apply_chat_template(messages[:k], add_generation_prompt=True, return_dict=True)["input_ids"]
            full = tok.apply_chat_template(messages[: k + 1], return_dict=True)["input_ids"]
            assert full[: len(prompt)] == prompt


def test_swap_roles_gives_customer_view(tok):
    messages = conversation()
    messages.insert(3, {"role": "assistant", "content": "<intent>card_arrival<call>lookup_account {}</call>"})
    view = swap_roles(messages, goal="Your card card-0007 has not arrived. Be impatient.")
    assert view == [
        {"role": "system", "content": "Your card card-0007 has not arrived. Be impatient."},
        {"role": "assistant", "content": "My new card still hasn't arrived."},
        {"role": "user", "content": "Let me check.\nIt ships today.\nIt arrives on Friday. Anything else?"},
        {"role": "assistant", "content": "No, thanks!"},
    ]
    prompt = tok.apply_chat_template(view, tokenize=False, add_generation_prompt=True)
    assert prompt.endswith(END_OF_TURN + ASSISTANT)
    for hidden in (INTENT, CALL_OPEN, CALL_CLOSE, TOOL, "shipped", "You are a support agent"):
        assert hidden not in prompt


def test_batched_encoding_pads_left(tok, reloaded):
    for t in (tok, reloaded):
        batch = t(["Hi", "My card was charged twice, please help."], padding=True)
        short_ids, short_mask = batch["input_ids"][0], batch["attention_mask"][0]
        assert short_mask[0] == 0 and short_mask[-1] == 1
        assert short_ids[0] == t.pad_token_id
        assert t.decode(short_ids, skip_special_tokens=True) == "Hi"
        chats = [conversation()[:2], conversation()[:4]]
        enc = t.apply_chat_template(chats, add_generation_prompt=True, padding=True, return_dict=True)
        assert enc["attention_mask"][0][0] == 0 and enc["input_ids"][0][-1] == t.convert_tokens_to_ids(ASSISTANT)


def test_object_ids_tokenize_alike_in_results_and_calls(tok):
    """An id the agent copies from a tool result into its call is the same short token run in both places."""
    for value in ("tx_042", "card_653", "ben_907"):
        alone = tok(value, add_special_tokens=False)["input_ids"]
        result = tok(f'[["{value}","card_payment",55.03]]', add_special_tokens=False)["input_ids"]
        call = tok(f'{{"transaction_id":"{value}"}}', add_special_tokens=False)["input_ids"]
        assert any(result[i : i + len(alone)] == alone for i in range(len(result))), value
        assert any(call[i : i + len(alone)] == alone for i in range(len(call))), value

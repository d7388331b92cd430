"""A support domain as a data file: its tools, the intents they resolve, identity, objects, policy and generator data.

A domain is ``<name>.yaml`` in this folder (or any path), with the phrase material for its synthetic generator beside
it (``lexicon``). :func:`load_domain` reads it, checks its shape and its cross-references (an intent's tool and
action exist, a precondition's argument is a parameter, ...) and refuses a bad file with every problem's key path
and line, so a new domain fails at load time, not in the middle of a run. What a file cannot say (the tools'
effects on the world's state, its generator, planting and expert) is the Python module the file names (``module``;
:mod:`sparring.world.domain_code` lists what it provides).

Over 400 lines: every key's declaration with its one-line meaning and every cross-reference check, the domain file's
whole schema in one place.
"""

from __future__ import annotations

import importlib.util
import re
from datetime import date
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sparring.domains.records import (
    Domain,
    DomainError,
    Identity,
    IntentSpec,
    Param,
    SocialEngineering,
    Tactic,
    ToolSpec,
)

__all__ = [
    "Domain", "DomainError", "Identity", "IntentSpec", "Param", "SocialEngineering", "Tactic", "ToolSpec",
    "ENDING_TOOLS", "domain_path", "load_domain",
]  # fmt: skip

HERE = Path(__file__).parent
# The tools every domain ends a conversation with (the rollout, the outcome check and the judge read these names).
ENDING_TOOLS = ("end_conversation", "transfer_to_human")


# ----------------------------------------------------------------------------------------------------------------
# The file's shape: unknown keys and wrong types are refused by pydantic; the cross-references by _cross_check.


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _ParamDecl(_Strict):
    type: Literal["string", "number", "array"] = "string"  # JSON type of the argument (array: a list of strings)
    description: str  # what the argument means, as the agent's tool schema says it
    choices: list[str] | None = None  # its closed vocabulary, if any


class _ToolDecl(_Strict):
    description: str  # what the tool does, as the agent's tool schema says it
    summary: str | None = None  # what requests it resolves (tools that resolve intents)
    needs_identity: bool = True  # refuses before the identity tool identified the customer
    reads: bool = False  # shows the account and changes nothing
    asks_customer: bool = False  # puts a question to the customer: ends the agent's turn, changes nothing
    selector: str | None = None  # the argument that picks the operation; its values are the actions' names
    params: dict[str, _ParamDecl] = {}
    actions: dict[str, list[str]] = {}  # operation -> the other arguments it requires (and alone allows)
    required: list[str] = []  # mandatory arguments of a tool without a selector
    free_text: list[str] = []  # arguments whose value is prose the agent writes, not data it copied


class _IntentDecl(_Strict):
    tool: str  # the tool whose call resolves it
    action: str | None = None  # the selector value of the resolving call (none: reading the account resolves it)
    target: str | None = None  # the kind of object the call names (an `objects` key)
    fixed: dict[str, str | float] = {}  # constant arguments of the resolving call
    slots: list[str] = []  # arguments the customer tells the agent (copied from the scenario's slots)
    description: str  # one line: what the customer wants


class _IdentityDecl(_Strict):
    tool: str  # the tool that identifies the customer
    id_arg: str  # its argument that names the customer
    facts: list[str]  # the facts it checks, each one of its parameters
    facts_needed: int = Field(ge=1)  # how many of them must match
    max_failures: int = Field(ge=1)  # failed identifications before further lookups are refused
    values: dict[str, list[str]]  # id_arg and each fact -> regexes of its value, the canonical form first
    ask: str  # how the scripted expert asks for identity
    reask: str  # what it asks again after a customer declined to verify
    declined: str  # regex: a customer declining to verify, in the domain's words (any case)
    asked: str  # regex: an agent turn that asks for identity (any case)
    asked_in_dialogues: str  # regex: the same in the generator's dialogues, as the simulator's data reader takes it
    said: dict[str, str] = {}  # key -> regex of the words before its value anywhere in a customer's message
    answered: dict[str, str] = {}  # key -> regex of the words before it in an answer to an identity question
    ignore_case: list[str] = []  # keys whose value and wording are read in any case


class _WhichInDialoguesDecl(_Strict):
    objects: str  # regex: an agent turn naming one of the customer's objects (any case)
    identifying: str  # regex: ... and asking what identifies it
    not_which: str  # regex: an identity check, a confirmation or a closing line, which is no which-question


class _ObjectDecl(_Strict):
    id_arg: str  # the argument that names an object of this kind
    listed_in: str  # where the identity tool's result lists them
    words: list[str] = Field(min_length=1)  # regexes of how an agent names one when it asks "which ...?"
    which: str  # the scripted expert's question for one: what identifies it


class _TacticDecl(_Strict):
    openings: list[str] = Field(min_length=1)  # its first messages
    answers: list[str] = Field(min_length=1)  # what it says when asked to verify
    request: str  # its request in brief, as its pushes quote it


class _SocialEngineeringDecl(_Strict):
    tactics: dict[str, _TacticDecl] = Field(min_length=1)  # tactic -> its phrases
    pushes: list[str] = Field(min_length=1)  # after a refusal
    after_done: list[str] = Field(min_length=1)  # once told the request is done
    goodbyes: list[str] = Field(min_length=1)


class _DomainDecl(_Strict):
    domain: str  # the domain's name
    system_prompt: str  # the agent's system message, where it reads one (agent_sft.system_prompt)
    customer_intro: str  # the first sentence of an LM customer's goal: who they are and where they are chatting
    lexicon: str  # the synthetic generator's phrase material, relative to this file
    module: str  # the Python module with what the file cannot say: state, generator, effects (world.domain_code)
    today: date  # "today" in the simulated world: the generator's dates count back from it
    identity: _IdentityDecl
    personas: dict[str, float]  # customer persona -> default share of scenarios
    objects: dict[str, _ObjectDecl]
    which_in_dialogues: _WhichInDialoguesDecl  # how the simulator's data reader tells a which-object question
    read_args: list[str] = []  # closed-vocabulary arguments whose value is read off an earlier result
    tools: dict[str, _ToolDecl]
    intents: dict[str, _IntentDecl]
    policy: dict[str, dict[str, dict[str, Any]]] = {}  # tool -> action -> the facts its informational call returns
    declines: dict[str, str] = {}  # why a payment of each kind was declined
    social_engineering: _SocialEngineeringDecl  # the security track's scripted social engineer's phrases
    generator: dict[str, Any] = {}  # data the world generator draws from (the domain's code reads its keys)


# ----------------------------------------------------------------------------------------------------------------
# Loading: parse -> shape -> cross-references -> the records above.


def domain_path(name_or_path: str | Path) -> Path:
    """The file a domain name (``banking``) or a path names."""
    text = str(name_or_path)
    if text.endswith((".yaml", ".yml")) or "/" in text:
        return Path(text)
    return HERE / f"{text}.yaml"


def load_domain(name_or_path: str | Path) -> Domain:
    """The checked domain ``name_or_path`` names; :class:`DomainError` lists every problem with its line."""
    return _load(domain_path(name_or_path).resolve())


@cache
def _load(path: Path) -> Domain:
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in HERE.glob("*.yaml")))
        raise DomainError(f"{path}: no such domain file (packaged domains: {known})")
    text = path.read_text("utf-8")
    try:
        root = yaml.compose(text)
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise DomainError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise DomainError(f"{path}: a domain file is a mapping of sections (domain, identity, tools, intents, ...)")
    try:
        decl = _DomainDecl.model_validate(raw)
    except ValidationError as err:
        problems = [(tuple(e["loc"]), _pydantic_message(e)) for e in err.errors()]
        raise DomainError(_report(path, root, problems)) from None
    problems = _cross_check(decl)
    lexicon = (path.parent / decl.lexicon).resolve()
    if not lexicon.is_file():
        problems.append((("lexicon",), f"no such file {lexicon}"))
    if problems:
        raise DomainError(_report(path, root, problems))
    return _build(decl, path, lexicon)


def _pydantic_message(error: dict) -> str:
    if error["type"] == "extra_forbidden":
        return "unknown key"
    if error["type"] == "missing":
        return "missing key"
    return error["msg"]


def _report(path: Path, root: yaml.Node | None, problems: list[tuple[tuple, str]]) -> str:
    lines = [f"{path}: {len(problems)} problem(s):"]
    for loc, message in problems:
        lines.append(f"  line {_line(root, loc)}: {'.'.join(map(str, loc))}: {message}")
    return "\n".join(lines)


def _line(node: yaml.Node | None, loc: tuple) -> int:
    """The 1-based line of the deepest node of ``loc`` that exists (a missing key: its parent's line)."""
    line = 1 if node is None else node.start_mark.line + 1
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            match = [(k, v) for k, v in node.value if k.value == str(key)]
            if not match:
                break
            key_node, node = match[0]
            line = key_node.start_mark.line + 1
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
        else:
            break
    return line


def _cross_check(d: _DomainDecl) -> list[tuple[tuple, str]]:
    """Every reference between sections resolves: (key path, what is wrong) per problem.

    Over 60 lines: one check per reference the file can make, in the file's order."""
    out: list[tuple[tuple, str]] = []
    tools = d.tools
    if not _module_exists(d.module):
        out.append((("module",), f"no Python module {d.module!r}"))
    for name in ENDING_TOOLS:
        if name not in tools:
            out.append((("tools",), f"missing tool {name!r}: every domain ends conversations with it"))
    all_params = {p for t in tools.values() for p in t.params}
    out += _identity_problems(d)
    if not d.personas or sum(d.personas.values()) <= 0 or min(d.personas.values()) < 0:
        out.append((("personas",), "shares must be non-negative with a positive sum"))
    for kind, obj in d.objects.items():
        if obj.id_arg not in all_params:
            out.append((("objects", kind, "id_arg"), f"no tool has a parameter {obj.id_arg!r}"))
        for i, word in enumerate(obj.words):
            out += _regex_problem(("objects", kind, "words", i), word)
    for key, pattern in d.which_in_dialogues:
        out += _regex_problem(("which_in_dialogues", key), pattern)
    for i, arg in enumerate(d.read_args):
        if arg not in all_params:
            out.append((("read_args", i), f"no tool has a parameter {arg!r}"))
    for name, tool in tools.items():
        here = ("tools", name)
        if tool.selector is not None:
            if tool.selector not in tool.params:
                out.append((here + ("selector",), f"{tool.selector!r} is not one of its params"))
            elif tool.params[tool.selector].choices is not None:
                out.append((here + ("params", tool.selector, "choices"), "a selector's values are its actions"))
            if not tool.actions:
                out.append((here + ("actions",), "a tool with a selector needs actions"))
        elif tool.actions:
            out.append((here + ("actions",), "actions need a selector"))
        for action, args in tool.actions.items():
            for i, arg in enumerate(args):
                if arg not in tool.params or arg == tool.selector:
                    out.append((here + ("actions", action, i), f"precondition on unknown argument {arg!r}"))
        for key in ("required", "free_text"):
            for i, arg in enumerate(getattr(tool, key)):
                if arg not in tool.params:
                    out.append((here + (key, i), f"{arg!r} is not one of its params"))
    for intent, spec in d.intents.items():
        here = ("intents", intent)
        tool = tools.get(spec.tool)
        if tool is None:
            out.append((here + ("tool",), f"unknown tool {spec.tool!r}"))
            continue
        if spec.action is not None and spec.action not in tool.actions:
            out.append((here + ("action",), f"{spec.tool} has no action {spec.action!r}"))
        if spec.action is None and tool.selector is not None and not tool.reads:
            out.append((here + ("action",), f"missing: {spec.tool} picks its operation by {tool.selector}"))
        if spec.target is not None and spec.target not in d.objects:
            out.append((here + ("target",), f"unknown object kind {spec.target!r}"))
        for arg, value in spec.fixed.items():
            param = tool.params.get(arg)
            if param is None:
                out.append((here + ("fixed", arg), f"{spec.tool} has no parameter {arg!r}"))
            elif param.choices is not None and value not in param.choices:
                out.append((here + ("fixed", arg), f"{value!r} is not one of {param.choices}"))
        for i, arg in enumerate(spec.slots):
            if arg not in tool.params:
                out.append((here + ("slots", i), f"{spec.tool} has no parameter {arg!r}"))
    for tool_name, actions in d.policy.items():
        known = tools[tool_name].actions if tool_name in tools else {}
        for action in actions:
            if action not in known:
                out.append((("policy", tool_name, action), f"no tool action {tool_name}.{action}"))
    return out


def _identity_problems(d: _DomainDecl) -> list[tuple[tuple, str]]:
    """The identity section's references: its tool and arguments, a regex per identifying value, the wording."""
    out: list[tuple[tuple, str]] = []
    if d.identity.tool not in d.tools:
        out.append((("identity", "tool"), f"unknown tool {d.identity.tool!r}"))
    else:
        for i, fact in enumerate(d.identity.facts):
            if fact not in d.tools[d.identity.tool].params:
                out.append((("identity", "facts", i), f"{fact!r} is not a parameter of {d.identity.tool}"))
        if d.identity.id_arg not in d.tools[d.identity.tool].params:
            out.append((("identity", "id_arg"), f"{d.identity.id_arg!r} is not a parameter of {d.identity.tool}"))
    for key in (d.identity.id_arg, *d.identity.facts):
        if not d.identity.values.get(key):
            out.append((("identity", "values"), f"no regex for {key!r}: readers of transcripts would miss it"))
    for key, forms in d.identity.values.items():
        for i, form in enumerate(forms):
            out += _regex_problem(("identity", "values", key, i), form)
    for where in ("said", "answered"):
        for key, lead in getattr(d.identity, where).items():
            if key not in d.identity.values:
                out.append((("identity", where, key), f"{key!r} is not an identifying value (identity.values)"))
            out += _regex_problem(("identity", where, key), lead)
    for where in ("declined", "asked", "asked_in_dialogues"):
        out += _regex_problem(("identity", where), getattr(d.identity, where))
    for i, key in enumerate(d.identity.ignore_case):
        if key not in d.identity.values:
            out.append((("identity", "ignore_case", i), f"{key!r} is not an identifying value (identity.values)"))
    if d.identity.facts_needed > len(d.identity.facts):
        out.append((("identity", "facts_needed"), f"more than the {len(d.identity.facts)} facts listed"))
    return out


def _regex_problem(loc: tuple, pattern: str) -> list[tuple[tuple, str]]:
    try:
        re.compile(pattern)
    except re.error as exc:
        return [(loc, f"not a regex: {exc}")]
    return []


def _module_exists(module: str) -> bool:
    """Whether ``module`` can be imported, found without importing it (a missing parent package raises instead)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _identity(i: _IdentityDecl) -> Identity:
    """The record, key for key (the declaration's names are the record's), its lists frozen."""
    frozen = {"facts": tuple(i.facts), "values": {k: tuple(v) for k, v in i.values.items()}}
    return Identity(**{**i.model_dump(), **frozen, "ignore_case": frozenset(i.ignore_case)})


def _build(d: _DomainDecl, path: Path, lexicon: Path) -> Domain:
    tools: dict[str, ToolSpec] = {}
    for name, t in d.tools.items():
        actions = {a: tuple(args) for a, args in t.actions.items()}
        params = {
            p: Param(decl.type, decl.description, tuple(actions) if p == t.selector else _tuple(decl.choices))
            for p, decl in t.params.items()
        }
        tools[name] = ToolSpec(name, t.description, params, t.selector, actions, tuple(t.required), t.needs_identity)
    read_args = set(d.read_args)
    intents = {
        name: IntentSpec(
            name,
            s.tool,
            s.action,
            s.target,
            dict(s.fixed),
            tuple(s.slots),
            s.action is not None and bool(read_args & set(tools[s.tool].actions.get(s.action, ()))),
        )
        for name, s in d.intents.items()
    }
    return Domain(
        name=d.domain,
        path=path,
        lexicon=lexicon,
        module=d.module,
        system_prompt=d.system_prompt,
        customer_intro=d.customer_intro,
        identity=_identity(d.identity),
        personas=dict(d.personas),
        targets={kind: (o.id_arg, o.listed_in) for kind, o in d.objects.items()},
        object_words={kind: tuple(o.words) for kind, o in d.objects.items()},
        object_questions={kind: o.which for kind, o in d.objects.items()},
        which_in_dialogues=dict(d.which_in_dialogues),
        read_args=tuple(d.read_args),
        tools=tools,
        summaries={name: t.summary for name, t in d.tools.items() if t.summary is not None},
        read_tools=frozenset(name for name, t in d.tools.items() if t.reads),
        customer_moves=tuple(name for name, t in d.tools.items() if t.asks_customer),
        free_text={name: tuple(t.free_text) for name, t in d.tools.items() if t.free_text},
        intents=intents,
        intent_descriptions={name: s.description for name, s in d.intents.items()},
        policy={(tool, action): facts for tool, actions in d.policy.items() for action, facts in actions.items()},
        declines=dict(d.declines),
        social_engineering=SocialEngineering(
            {
                name: Tactic(tuple(t.openings), tuple(t.answers), t.request)
                for name, t in d.social_engineering.tactics.items()
            },
            tuple(d.social_engineering.pushes),
            tuple(d.social_engineering.after_done),
            tuple(d.social_engineering.goodbyes),
        ),
        generator=dict(d.generator),
        today=d.today,
    )


def _tuple(values: list[str] | None) -> tuple[str, ...] | None:
    return None if values is None else tuple(values)

"""Tool signatures, action vocabularies and the intent -> expected-call table.

Everything that says *which* call resolves *which* intent lives here, so the tools, the scenario
sampler, the expert and the provenance tracker all read one source of truth.

Over 400 lines: mostly the intent table (:func:`_specs`), one row per Banking77 intent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

CARD_KINDS = ("physical", "virtual", "disposable")
WALLETS = ("apple_pay", "google_pay")
SETTINGS_FIELDS = ("address", "postcode", "email", "phone")
PERSONAS = ("cooperative", "vague", "impatient", "camouflaging", "social_engineering")


@dataclass(frozen=True)
class Param:
    """One tool argument: its JSON type ("string" or "number"), meaning and, if closed, its vocabulary."""

    type: str
    description: str
    choices: tuple[str, ...] | None = None


@dataclass(frozen=True)
class ToolSpec:
    """A tool's signature.

    ``selector`` names the argument that picks the operation (``action``, ``reason`` or ``topic``);
    ``actions`` maps each selector value to the other arguments it requires (and alone allows).
    Tools without a selector list their mandatory arguments in ``required``.
    """

    name: str
    description: str
    params: dict[str, Param]
    selector: str | None = None
    actions: dict[str, tuple[str, ...]] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    needs_identity: bool = True  # account-level: refuses before lookup_account identified the customer


def _sel(actions: dict[str, tuple[str, ...]], description: str) -> Param:
    return Param("string", description, tuple(actions))


CARD_ACTIONS: dict[str, tuple[str, ...]] = {
    "track_delivery": ("card_id",),
    "delivery_info": (),
    "link_card": ("card_id",),
    "freeze": ("card_id",),
    "unfreeze": ("card_id",),
    "report_lost": ("card_id",),
    "report_compromised": ("card_id",),
    "unblock_pin": ("card_id",),
    "change_pin": ("card_id",),
    "enable_contactless": ("card_id",),
    "activate": ("card_id",),
    "replace": ("card_id",),
    "add_to_wallet": ("card_id", "wallet"),
    "order_card": ("kind",),
    "acceptance_info": (),
    "disposable_limits_info": (),
}
# Who handles cases on a payment (issue 28): a fact of each transaction and transfer that only payment_details
# shows, and that a dispute, a cancel, a trace or a retry must quote. The agent reads it, then acts on it: two
# dependent decisions with data flowing from one call's result into the next call's argument.
CASE_QUEUES = ("card_scheme_team", "merchant_team", "partner_bank_team")
QUEUE = "case_queue"
# Closed-vocabulary arguments whose value is read off an earlier result, not chosen (world.events' provenance).
READ_ARGS = (QUEUE,)
DETAIL_KINDS: dict[str, tuple[str, ...]] = {"transaction": ("transaction_id",), "transfer": ("transfer_id",)}
DISPUTE_REASONS: dict[str, tuple[str, ...]] = {
    reason: ("transaction_id", QUEUE)
    for reason in (
        "duplicate not_recognised wrong_exchange_rate wrong_cash_amount extra_charge refund_request "
        "refund_missing reverted_payment"
    ).split()
}
TRANSFER_ACTIONS: dict[str, tuple[str, ...]] = {
    "cancel": ("transfer_id", QUEUE),
    "trace": ("transfer_id", QUEUE),
    "retry": ("transfer_id", QUEUE),
    "explain_decline": ("transfer_id",),
    "approve_beneficiary": ("beneficiary_id",),
    "timing_info": (),
    "account_details_info": (),
}
TOP_UP_ACTIONS: dict[str, tuple[str, ...]] = {
    "trace": ("top_up_id",),
    "retry": ("top_up_id",),
    "verify": ("top_up_id",),
    "configure_auto": ("threshold", "amount"),
    "limits_info": (),
    "card_top_up_info": (),
    "cash_cheque_info": (),
}
CASH_ACTIONS: dict[str, tuple[str, ...]] = {
    "trace_withdrawal": ("transaction_id",),
    "explain_decline": ("transaction_id",),
    "report_retained": ("card_id",),
    "atm_info": (),
}
IDENTITY_ACTIONS: dict[str, tuple[str, ...]] = {
    "start_verification": (),
    "manual_review": (),
    "request_source_of_funds": (),
    "age_policy_info": (),
    "why_verify_info": (),
}
SETTINGS_ACTIONS: dict[str, tuple[str, ...]] = {
    "update": ("field", "value"),
    "reset_passcode": (),
    "lock_app_access": (),
    "close_account": (),
}
FEE_TOPICS: dict[str, tuple[str, ...]] = {
    topic: ()
    for topic in (
        "exchange_rate exchange_fee exchange_in_app fiat_currencies top_up_cards_and_currencies card_network "
        "supported_countries card_payment_fee transfer_fee cash_withdrawal_fee top_up_card_fee "
        "top_up_bank_transfer_fee"
    ).split()
}

_S = "string"
_QUEUE_PARAM = Param("string", "The team that handles cases on this payment, as payment_details shows it.", CASE_QUEUES)
# An object argument may name the object the customer's words identify instead of its id (world.described).
DESCRIBED = "described"
_OBJECT = 'The {}: its id as listed by lookup_account, or "described" for the one the customer described.'
# What lookup_account can show: one tab of the account (as a support console has), or everything.
ACCOUNT_PARTS = ("all", "profile", "cards", "transactions", "transfers", "top_ups", "beneficiaries")
TOOLS: dict[str, ToolSpec] = {
    "lookup_account": ToolSpec(
        "lookup_account",
        "Identify the customer and read their account: without identity arguments, verify the caller logged "
        "into the app; or by customer_id or full_name, plus two of date_of_birth, postcode, card_last4. "
        "show picks one part of the account (default: all of it).",
        {
            "show": Param(_S, "The part of the account to read.", ACCOUNT_PARTS),
            "customer_id": Param(_S, "Customer id, e.g. C123456."),
            "full_name": Param(_S, "Full name as registered."),
            "date_of_birth": Param(_S, "Date of birth, YYYY-MM-DD."),
            "postcode": Param(_S, "Postcode on file."),
            "card_last4": Param(_S, "Last four digits of one of the customer's cards."),
        },
        needs_identity=False,
    ),
    "card_services": ToolSpec(
        "card_services",
        "Order, activate, freeze, replace or configure cards, PINs and wallets.",
        {
            "action": _sel(CARD_ACTIONS, "What to do."),
            "card_id": Param(_S, _OBJECT.format("card")),
            "kind": Param(_S, "Kind of card to order.", CARD_KINDS),
            "wallet": Param(_S, "Mobile wallet.", WALLETS),
        },
        selector="action",
        actions=CARD_ACTIONS,
    ),
    "dispute_charge": ToolSpec(
        "dispute_charge",
        "Open a dispute or refund case on a transaction the customer contests.",
        {
            "transaction_id": Param(_S, _OBJECT.format("transaction")),
            "reason": _sel(DISPUTE_REASONS, "Why it is disputed."),
            QUEUE: _QUEUE_PARAM,
        },
        selector="reason",
        actions=DISPUTE_REASONS,
    ),
    "transfer_support": ToolSpec(
        "transfer_support",
        "Trace, cancel, retry or explain transfers; approve beneficiaries; explain receiving money.",
        {
            "action": _sel(TRANSFER_ACTIONS, "What to do."),
            "transfer_id": Param(_S, _OBJECT.format("transfer")),
            "beneficiary_id": Param(_S, _OBJECT.format("beneficiary")),
            QUEUE: _QUEUE_PARAM,
        },
        selector="action",
        actions=TRANSFER_ACTIONS,
    ),
    "payment_details": ToolSpec(
        "payment_details",
        "Read one transaction's or transfer's full record, with the team that handles its cases (case_queue), "
        "which disputes, cancels, traces and retries must quote.",
        {
            "kind": _sel(DETAIL_KINDS, "Which kind of payment."),
            "transaction_id": Param(_S, _OBJECT.format("transaction")),
            "transfer_id": Param(_S, _OBJECT.format("transfer")),
        },
        selector="kind",
        actions=DETAIL_KINDS,
    ),
    "top_up_support": ToolSpec(
        "top_up_support",
        "Trace, retry or verify top-ups; configure automatic top-up; explain top-up methods and limits.",
        {
            "action": _sel(TOP_UP_ACTIONS, "What to do."),
            "top_up_id": Param(_S, _OBJECT.format("top-up")),
            "threshold": Param("number", "Automatic top-up triggers when the balance falls below this."),
            "amount": Param("number", "Automatic top-up amount."),
        },
        selector="action",
        actions=TOP_UP_ACTIONS,
    ),
    "cash_services": ToolSpec(
        "cash_services",
        "ATM problems: trace pending withdrawals, explain declined ones, report a retained card.",
        {
            "action": _sel(CASH_ACTIONS, "What to do."),
            "transaction_id": Param(_S, "The ATM withdrawal, as listed by lookup_account."),
            "card_id": Param(_S, "The card the ATM retained."),
        },
        selector="action",
        actions=CASH_ACTIONS,
    ),
    "identity_verification": ToolSpec(
        "identity_verification",
        "Start, review or explain identity and source-of-funds verification.",
        {"action": _sel(IDENTITY_ACTIONS, "What to do.")},
        selector="action",
        actions=IDENTITY_ACTIONS,
    ),
    "account_settings": ToolSpec(
        "account_settings",
        "Change personal details, reset the passcode, lock app access or close the account.",
        {
            "action": _sel(SETTINGS_ACTIONS, "What to do."),
            "field": Param(_S, "Detail to change.", SETTINGS_FIELDS),
            "value": Param(_S, "New value for the detail."),
        },
        selector="action",
        actions=SETTINGS_ACTIONS,
    ),
    "fees_and_rates": ToolSpec(
        "fees_and_rates",
        "Explain fees, exchange rates, currencies, countries and card networks (recorded on the file).",
        {"topic": _sel(FEE_TOPICS, "What to explain.")},
        selector="topic",
        actions=FEE_TOPICS,
    ),
    "end_conversation": ToolSpec(
        "end_conversation",
        "End the conversation once the request is resolved.",
        {"resolution": Param(_S, "One-line summary of how the request was resolved.")},
        required=("resolution",),
        needs_identity=False,
    ),
    "transfer_to_human": ToolSpec(
        "transfer_to_human",
        "Hand the conversation to a human agent; ends the conversation.",
        {"reason": Param(_S, "Why a human is needed.")},
        required=("reason",),
        needs_identity=False,
    ),
    # Clarifying moves (issue 25): a question to the customer, so the agent's turn ends and the customer answers.
    "ask_customer": ToolSpec(
        "ask_customer",
        "Ask the customer which object they mean (the message's text is the question); they answer next.",
        {
            "about": Param(
                _S, "The kind of object to ask about.", ("card", "transaction", "transfer", "top_up", "beneficiary")
            )
        },
        required=("about",),
        needs_identity=False,
    ),
    "confirm_request": ToolSpec(
        "confirm_request",
        "Check the request with the customer before acting (the message's text states it); they answer next.",
        {"intent": Param(_S, "The intent the agent believes the customer has.")},
        required=("intent",),
        needs_identity=False,
    ),
}
# Moves that put a question to the customer: they change nothing, end the agent's turn and are not the "first
# call" or "last call" the outcome check reads.
CUSTOMER_MOVES = ("ask_customer", "confirm_request")
READ_TOOLS = frozenset({"lookup_account", "payment_details"})  # tools that show the account and change nothing

# Arguments whose value is prose written by the agent, not data copied from somewhere.
FREE_TEXT_PARAMS: dict[str, tuple[str, ...]] = {
    "end_conversation": ("resolution",),
    "transfer_to_human": ("reason",),
    "confirm_request": ("intent",),  # the agent's own belief about the request, not data it copied
}

# Which argument names an object of each kind, and where lookup_account lists it.
TARGETS: dict[str, tuple[str, str]] = {
    "card": ("card_id", "cards"),
    "transaction": ("transaction_id", "transactions"),
    "transfer": ("transfer_id", "transfers"),
    "top_up": ("top_up_id", "top_ups"),
    "beneficiary": ("beneficiary_id", "beneficiaries"),
}
# The arguments that name an object, e.g. transaction_id.
ID_KEYS = frozenset(id_key for id_key, _ in TARGETS.values())


@dataclass(frozen=True)
class IntentSpec:
    """The definite resolving call for an intent.

    ``action`` is the selector value (None for lookup-only intents), ``target`` the kind of object whose
    id the call needs, ``fixed`` constant extra arguments and ``slot_args`` arguments copied from the
    scenario's slots (what the customer will tell the agent).
    """

    intent: str
    tool: str
    action: str | None = None
    target: str | None = None
    fixed: dict[str, Any] = field(default_factory=dict)
    slot_args: tuple[str, ...] = ()

    @property
    def quotes_queue(self) -> bool:
        """Whether the resolving call quotes the object's ``case_queue``, so ``payment_details`` comes first."""
        tool = TOOLS[self.tool]
        return self.action is not None and QUEUE in tool.actions.get(self.action, ())


def _specs() -> dict[str, IntentSpec]:
    """Each intent's resolving call, from the table of rows below.

    Over 60 lines: a table, one row per intent."""
    rows: list[tuple] = [
        # lookup_account: reading the account is the resolution (explain a pending/declined item).
        ("balance_not_updated_after_cheque_or_cash_deposit", "lookup_account", None, "top_up"),
        ("balance_not_updated_after_bank_transfer", "lookup_account", None, "transfer"),
        ("pending_card_payment", "lookup_account", None, "transaction"),
        ("declined_card_payment", "lookup_account", None, "transaction"),
        # card_services
        ("card_arrival", "card_services", "track_delivery", "card"),
        ("card_delivery_estimate", "card_services", "delivery_info", None),
        ("card_linking", "card_services", "link_card", "card"),
        ("card_not_working", "card_services", "unfreeze", "card"),
        ("virtual_card_not_working", "card_services", "unfreeze", "card"),
        ("lost_or_stolen_card", "card_services", "report_lost", "card"),
        ("compromised_card", "card_services", "report_compromised", "card"),
        ("pin_blocked", "card_services", "unblock_pin", "card"),
        ("change_pin", "card_services", "change_pin", "card"),
        ("contactless_not_working", "card_services", "enable_contactless", "card"),
        ("activate_my_card", "card_services", "activate", "card"),
        ("card_about_to_expire", "card_services", "replace", "card"),
        ("apple_pay_or_google_pay", "card_services", "add_to_wallet", "card", {}, ("wallet",)),
        ("getting_virtual_card", "card_services", "order_card", None, {"kind": "virtual"}),
        ("get_disposable_virtual_card", "card_services", "order_card", None, {"kind": "disposable"}),
        ("get_physical_card", "card_services", "order_card", None, {"kind": "physical"}),
        ("order_physical_card", "card_services", "order_card", None, {"kind": "physical"}),
        ("getting_spare_card", "card_services", "order_card", None, {"kind": "physical"}),
        ("card_acceptance", "card_services", "acceptance_info", None),
        ("disposable_card_limits", "card_services", "disposable_limits_info", None),
        # dispute_charge
        ("transaction_charged_twice", "dispute_charge", "duplicate", "transaction"),
        ("card_payment_not_recognised", "dispute_charge", "not_recognised", "transaction"),
        ("direct_debit_payment_not_recognised", "dispute_charge", "not_recognised", "transaction"),
        ("cash_withdrawal_not_recognised", "dispute_charge", "not_recognised", "transaction"),
        ("card_payment_wrong_exchange_rate", "dispute_charge", "wrong_exchange_rate", "transaction"),
        ("wrong_exchange_rate_for_cash_withdrawal", "dispute_charge", "wrong_exchange_rate", "transaction"),
        ("wrong_amount_of_cash_received", "dispute_charge", "wrong_cash_amount", "transaction"),
        ("extra_charge_on_statement", "dispute_charge", "extra_charge", "transaction"),
        ("request_refund", "dispute_charge", "refund_request", "transaction"),
        ("Refund_not_showing_up", "dispute_charge", "refund_missing", "transaction"),
        ("reverted_card_payment?", "dispute_charge", "reverted_payment", "transaction"),
        # transfer_support
        ("cancel_transfer", "transfer_support", "cancel", "transfer"),
        ("pending_transfer", "transfer_support", "trace", "transfer"),
        ("transfer_not_received_by_recipient", "transfer_support", "trace", "transfer"),
        ("failed_transfer", "transfer_support", "retry", "transfer"),
        ("declined_transfer", "transfer_support", "explain_decline", "transfer"),
        ("beneficiary_not_allowed", "transfer_support", "approve_beneficiary", "beneficiary"),
        ("transfer_timing", "transfer_support", "timing_info", None),
        ("receiving_money", "transfer_support", "account_details_info", None),
        ("transfer_into_account", "transfer_support", "account_details_info", None),
        # top_up_support
        ("pending_top_up", "top_up_support", "trace", "top_up"),
        ("top_up_reverted", "top_up_support", "trace", "top_up"),
        ("top_up_failed", "top_up_support", "retry", "top_up"),
        ("verify_top_up", "top_up_support", "verify", "top_up"),
        ("automatic_top_up", "top_up_support", "configure_auto", None, {}, ("threshold", "amount")),
        ("top_up_limits", "top_up_support", "limits_info", None),
        ("topping_up_by_card", "top_up_support", "card_top_up_info", None),
        ("top_up_by_cash_or_cheque", "top_up_support", "cash_cheque_info", None),
        # cash_services
        ("pending_cash_withdrawal", "cash_services", "trace_withdrawal", "transaction"),
        ("declined_cash_withdrawal", "cash_services", "explain_decline", "transaction"),
        ("card_swallowed", "cash_services", "report_retained", "card"),
        ("atm_support", "cash_services", "atm_info", None),
        # identity_verification
        ("verify_my_identity", "identity_verification", "start_verification", None),
        ("unable_to_verify_identity", "identity_verification", "manual_review", None),
        ("verify_source_of_funds", "identity_verification", "request_source_of_funds", None),
        ("age_limit", "identity_verification", "age_policy_info", None),
        ("why_verify_identity", "identity_verification", "why_verify_info", None),
        # account_settings
        ("edit_personal_details", "account_settings", "update", None, {}, ("field", "value")),
        ("passcode_forgotten", "account_settings", "reset_passcode", None),
        ("lost_or_stolen_phone", "account_settings", "lock_app_access", None),
        ("terminate_account", "account_settings", "close_account", None),
        # fees_and_rates
        ("exchange_rate", "fees_and_rates", "exchange_rate", None),
        ("exchange_charge", "fees_and_rates", "exchange_fee", None),
        ("exchange_via_app", "fees_and_rates", "exchange_in_app", None),
        ("fiat_currency_support", "fees_and_rates", "fiat_currencies", None),
        ("supported_cards_and_currencies", "fees_and_rates", "top_up_cards_and_currencies", None),
        ("visa_or_mastercard", "fees_and_rates", "card_network", None),
        ("country_support", "fees_and_rates", "supported_countries", None),
        ("card_payment_fee_charged", "fees_and_rates", "card_payment_fee", None),
        ("transfer_fee_charged", "fees_and_rates", "transfer_fee", None),
        ("cash_withdrawal_charge", "fees_and_rates", "cash_withdrawal_fee", None),
        ("top_up_by_card_charge", "fees_and_rates", "top_up_card_fee", None),
        ("top_up_by_bank_transfer_charge", "fees_and_rates", "top_up_bank_transfer_fee", None),
    ]
    out: dict[str, IntentSpec] = {}
    for row in rows:
        intent, tool, action, target, *rest = row
        fixed = rest[0] if rest else {}
        slot_args = rest[1] if len(rest) > 1 else ()
        # Lookup-only intents name a target kind only so the sampler plants something to explain.
        out[intent] = IntentSpec(intent, tool, action, target, dict(fixed), tuple(slot_args))
    return out


INTENT_SPECS: dict[str, IntentSpec] = _specs()


def resolving_args(
    spec: IntentSpec, target_id: str | None, slots: dict[str, Any], queue: str | None = None
) -> dict[str, Any]:
    """The resolving call's arguments for ``spec``, given the target's id, the scenario slots and, for a call that
    quotes it, the target's ``case_queue`` as ``payment_details`` showed it."""
    tool = TOOLS[spec.tool]
    args: dict[str, Any] = {}
    if tool.selector and spec.action is not None:
        args[tool.selector] = spec.action
    if spec.target is not None and target_id is not None:
        args[TARGETS[spec.target][0]] = target_id
    args.update(spec.fixed)
    for name in spec.slot_args:
        args[name] = slots[name]
    if spec.quotes_queue:
        if queue is None:
            raise ValueError(f"{spec.intent}'s resolving call quotes the case queue; read it with payment_details")
        args[QUEUE] = queue
    return args


def tool_schemas() -> list[dict[str, Any]]:
    """JSON-schema function declarations for every tool (for prompting a function-calling model)."""
    schemas = []
    for spec in TOOLS.values():
        props: dict[str, Any] = {}
        for name, p in spec.params.items():
            prop: dict[str, Any] = {"type": p.type, "description": p.description}
            if p.choices:
                prop["enum"] = list(p.choices)
            props[name] = prop
        required = [spec.selector] if spec.selector else list(spec.required)
        description = spec.description
        if spec.selector:
            # Spell out which arguments each operation takes: the schema alone cannot say it.
            ops = ", ".join(f"{a}({', '.join(req)})" for a, req in spec.actions.items())
            description += f" {spec.selector} values and their arguments: {ops}."
        schemas.append(
            {
                "name": spec.name,
                "description": description,
                "parameters": {"type": "object", "properties": props, "required": required},
            }
        )
    return schemas

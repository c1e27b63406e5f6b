"""What the registry knows of the world (coffer.discovery.world), over the recorded official registry:
a word names a service the vault lacks when the registry names servers by it and the rest of the ask is
what those servers do; the same word as the subject of an ask for something else is an argument."""

from __future__ import annotations

import pytest

from coffer.discovery import world
from evals.find import available, recorded_words

pytestmark = pytest.mark.skipif(not available(), reason="needs ../shared/data/registry (the recorded registry)")


def strongest(query: str) -> float:
    known = recorded_words()
    assert known is not None
    found = world.services(query, lambda word: word in {"list", "month", "stock", "price", "text"}, known)
    return found[0][1] if found else 0.0


def test_what_the_servers_do_tells_a_service_from_an_argument(monkeypatch: pytest.MonkeyPatch) -> None:
    asks_stripe = "list this month's Stripe invoices"
    assert strongest(asks_stripe) > world.THRESHOLD  # Stripe's servers are about invoices
    assert strongest("what is the stock price of Apple") <= world.THRESHOLD  # Apple's servers: notes, music
    assert strongest("echo the text Paris back") <= world.THRESHOLD  # names hardly any server
    monkeypatch.setattr(world, "CONTEXT_WEIGHT", 0.0)  # the registry's names alone
    assert strongest(asks_stripe) <= world.THRESHOLD


def test_the_words_keep_what_each_name_s_servers_are_about() -> None:
    counted = world.count(
        [
            ("io.github.a/stripe-mcp", "stripe-mcp", "Stripe", "Create invoices and refund payments"),
            ("io.github.b/stripe", "stripe", "", "Stripe invoices, customers and refunds"),
            ("io.github.c/notes", "notes", "", "Notes that mention Stripe once"),
        ]
    )
    assert counted.named["stripe"] == 2 and counted.used["stripe"] == 3
    assert counted.context("stripe", ["invoic", "refund"]) == 1.0
    assert counted.context("stripe", ["weather"]) == 0.0
    assert counted.context("paris", ["invoic"]) == 0.0

"""The ranker's tuned rules, each one switch, all on by default.

Every rule here was added to move an eval figure; `python -m evals.ablate` switches each off in turn
and reports its effect on every data set in evals/ (evals/README.md, "Ablation"). A rule that earns
no 0.5 point anywhere without costing one elsewhere is removed, not kept switched on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, fields, replace


@dataclass(frozen=True)
class Rules:
    """Which tuned rules a Ranker applies (coffer.ranking.ranker, .rerank, .vocabulary, .bm25)."""

    field_weights: bool = True  # BM25F: the name field weighs 2.5, parameter text 0.3 (off: every field 1.0)
    sentence_vectors: bool = True  # a long doc's best sentence counts half of its semantic score
    vocabulary: bool = True  # developer words mapped to catalogue words ("grab" -> get, "ls" -> list directory)
    name_cover: bool = True  # a leading tool whose whole name the query explains gets a bonus
    action_families: bool = True  # a leading tool whose name starts with another kind of action loses
    implied_needs: bool = True  # the best tool for a need the query implies gets a place (tools only)
    glossary: bool = True  # queries in eight other languages read through the glossary
    questions: bool = True  # a question ("what branch am I on") asks to know: tools that act lose more
    deprecated: bool = True  # a doc whose text says it is deprecated ranks below what replaces it

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]


ALL = Rules()
_current = [ALL]


def current() -> Rules:
    """The rules a Ranker built without explicit `rules` applies: all of them, except inside `ablated`."""
    return _current[-1]


@contextlib.contextmanager
def ablated(*off: str) -> Iterator[Rules]:
    """Rankers built inside (by any code path: the gateway's, `coffer__ask`'s) apply every rule but `off`.
    For the eval harness (`python -m evals.ablate`), which runs the suites as the product does."""
    rules = replace(current(), **dict.fromkeys(off, False))
    _current.append(rules)
    try:
        yield rules
    finally:
        _current.pop()

"""The passes over fused scores that turn them into the hits a Ranker returns.

- `NameFit`: among the leading candidates, a tool whose whole name the query explains gains, one whose
  action (its name's verb, else its description's) is of another family than the query's loses
  (coffer.ranking.vocabulary), more when the query is a question (a question asks to know:
  `git_create_branch` does not answer "what branch am I on"); a name's own server prefix is not its
  action (`git_create_branch`: create);
- `place_implied`: the best tool for a need the query implies (coffer.ranking.implied) gets a place.
Each pass can be switched off (coffer.ranking.rules) and is measured on every eval set.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from coffer.ranking.docs import Doc, SavedDocs, lead_word
from coffer.ranking.fuse import top_k
from coffer.ranking.tokenize import tokenize
from coffer.ranking.vocabulary import Rewrite, name_families

if TYPE_CHECKING:
    import numpy as np

NAME_COVER_BONUS = 0.05
NAME_COVER_CANDIDATES = 30
# A leading candidate whose name starts with an action of another family than the query's loses this
# much (vocabulary.VERB_FAMILIES); chosen between 0.06 and 0.1 on every set, see evals/README.md.
OTHER_ACTION_PENALTY = 0.1
# A question asks to know: a leading candidate that does something else (creates, edits, converts) loses
# more than for a verb conflict, which may be a misread verb (0.1-0.3 tried, 0.3 since retrieving is a
# question's one family: evals/README.md, "Questions").
QUESTION_PENALTY = 0.3
# Where the best tool for an implied need goes when it is not already above that place (0-based).
IMPLIED_SLOT = 2

Scorer = Callable[[str], "np.ndarray"]


class NameFit:
    """The name bonus and the other-action penalty over one doc list; a name's terms and its leading
    action's families are worked out on first use (only leading candidates ever need them)."""

    def __init__(self, docs: Sequence[Doc], cover: bool = True, families: bool = True) -> None:
        self.docs = docs
        self.cover = cover
        self.families = families
        self._names: dict[int, tuple[frozenset[str], frozenset[str]]] = {}

    def _fit(self, i: int) -> tuple[frozenset[str], frozenset[str]]:
        """A doc's name terms, and the families of its action (coffer.ranking.vocabulary.name_families)."""
        doc = self.docs[i]
        server = doc.server or (doc.id.partition("__")[0] if "__" in doc.id else "")  # a saved doc: its id's
        lead = self.docs.leads[i] if isinstance(self.docs, SavedDocs) else lead_word(doc.text)
        return frozenset(tokenize(doc.name)), name_families(doc.name, server, lead)

    def __call__(self, scores: np.ndarray, rw: Rewrite) -> np.ndarray:
        if not len(scores) or not (self.cover or self.families):
            return scores
        wanted = set(rw.terms)
        out = scores.copy()
        for i in top_k(scores, NAME_COVER_CANDIDATES):
            fit = self._names.get(i)
            if fit is None:
                fit = self._names[i] = self._fit(i)
            terms, verb_families = fit
            if self.cover and terms and terms <= wanted:
                out[i] += NAME_COVER_BONUS
            if self.families and rw.families and verb_families and not verb_families & rw.families:
                out[i] -= QUESTION_PENALTY if rw.question else OTHER_ACTION_PENALTY
        return out


def place_implied(scores: Scorer, need: str, slot: int, order: list[int], values: dict[int, float]) -> None:
    """Move the best doc for `need` up to `slot` unless it already ranks there or higher.

    It takes the place, and the score, of the hit it moves down, so scores stay sorted.
    """
    need_scores = scores(need)
    best = top_k(need_scores, 1)
    if not best or best[0] in order[: slot + 1]:
        return
    doc = best[0]
    if doc in order:
        order.remove(doc)
    slot = min(slot, len(order))
    if slot < len(order):
        values[doc] = values[order[slot]]
    else:  # fewer hits than the slot: goes last, never above the hit before it
        values[doc] = min(values[order[-1]], float(need_scores[doc])) if order else float(need_scores[doc])
    order.insert(slot, doc)

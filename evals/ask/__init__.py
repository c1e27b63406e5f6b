"""Retrieval eval for `coffer__ask`: questions over a bundled vault, scored against gold passages.

The vault is built the way users build theirs: short notes (`notes.jsonl`) and Markdown files added as
memory notes, and two documents indexed as an upstream's text resources (server `docs`). A question's
gold is a phrase from its source document; any passage containing the phrase is a hit, so the gold
set survives changes to how documents are split into passages.
Run: `python -m evals.ask [--mode hybrid|bm25|semantic ...] [--json]`.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
CORPUS = HERE / "corpus"
RESOURCE_DOCS = ("architecture.md", "api-style-guide.md")
MODES = ("hybrid", "bm25", "semantic")
K = 10


@dataclass(frozen=True)
class Question:
    text: str
    gold: str


def load_questions() -> list[Question]:
    lines = (HERE / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    return [Question(d["q"], d["gold"]) for d in (json.loads(line) for line in lines if line.strip())]


def build_vault() -> int:
    """Fill the current COFFER_HOME's memory with the bundled corpus; returns the passage count."""
    from coffer.memory import knowledge as memory

    for line in (HERE / "notes.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            note = json.loads(line)
            memory.add_note(note["text"], note.get("tags", []))
    for path in sorted(CORPUS.glob("*.md")):
        if path.name not in RESOURCE_DOCS:
            memory.add_note(memory.read_note_file(path), ["docs"], source=path.name)
    items = [(f"docs://{name}", name, (CORPUS / name).read_text(encoding="utf-8")) for name in RESOURCE_DOCS]
    memory.index_resources("docs", items)
    with memory._connect() as db:
        return len(memory._load_passages(db, None))


def first_hit(texts: list[str], gold: str) -> int | None:
    """0-based rank of the first passage containing the gold phrase."""
    return next((i for i, t in enumerate(texts) if gold in t), None)


def evaluate(mode: str, questions: list[Question]) -> dict[str, Any]:
    from coffer.memory import knowledge as memory

    ranks: list[int | None] = []
    ranker = ""
    for q in questions:
        result = memory.search(q.text, K, mode=mode)
        ranker = result["ranker"]
        ranks.append(first_hit([p["text"] for p in result["passages"]], q.gold))
    n = len(questions)
    return {
        "mode": mode,
        "ranker": ranker,
        "questions": n,
        "recall@1": sum(r is not None and r < 1 for r in ranks) / n,
        "recall@5": sum(r is not None and r < 5 for r in ranks) / n,
        "mrr@10": sum(1 / (r + 1) for r in ranks if r is not None) / n,
        "misses@5": [q.text for q, r in zip(questions, ranks, strict=True) if r is None or r >= 5],
    }


def run(modes: tuple[str, ...] = MODES) -> dict[str, Any]:
    """Build the vault in a throwaway COFFER_HOME and score every mode."""
    questions = load_questions()
    old = os.environ.get("COFFER_HOME")
    with tempfile.TemporaryDirectory(prefix="coffer-ask-eval-") as home:
        os.environ["COFFER_HOME"] = home
        try:
            passages = build_vault()
            from coffer.memory import knowledge as memory

            with memory._connect() as db:
                texts = [p.text for p in memory._load_passages(db, None)]
            orphans = [q.gold for q in questions if first_hit(texts, q.gold) is None]
            if orphans:
                raise SystemExit(f"gold phrases found in no passage: {orphans}")
            results = [evaluate(mode, questions) for mode in modes]
        finally:
            if old is None:
                os.environ.pop("COFFER_HOME", None)
            else:
                os.environ["COFFER_HOME"] = old
    return {"suite": "ask", "passages": passages, "questions": len(questions), "results": results}


def print_report(report: dict[str, Any], misses: bool = False) -> None:
    print(f"ask: {report['questions']} questions over {report['passages']} passages (notes + resources)")
    print(f"{'mode':10} {'ranker':10} {'R@1':>6} {'R@5':>6} {'MRR@10':>7}")
    for r in report["results"]:
        print(f"{r['mode']:10} {r['ranker']:10} {r['recall@1']:6.3f} {r['recall@5']:6.3f} {r['mrr@10']:7.3f}")
        for q in r["misses@5"] if misses else []:
            print(f"    miss: {q}")

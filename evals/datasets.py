"""Loading the eval data sets: tools as catalogue-like records, queries with gold groups."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DATA_DIR = Path(__file__).parent / "data"
DATASETS = ("coffer-real", "livemcpbench", "metatool")
# Report-only sets: not in the regression baseline, ranked over coffer-real's tools. coffer-real-i18n is
# 36 coffer-real queries written in six other languages (es, de, fr, pt, zh, ja);
# coffer-real-i18n-heldout is 15 others in eight (it and ru too), written after the glossary
# (coffer.ranking.languages) was, to measure it on queries it was not written in view of.
# plain-asks: everyday asks (remember, forget, add two numbers, the time in Tokyo), over coffer-real's tools.
EXTRA_DATASETS = ("coffer-real-i18n", "coffer-real-i18n-heldout", "plain-asks")
_TOOLS_FROM = dict.fromkeys(EXTRA_DATASETS, "coffer-real")
# metatool has 21,111 queries; a fixed, order-independent subsample keeps the default run fast.
METATOOL_SAMPLE = 1000


@dataclass(frozen=True)
class EvalTool:
    """Duck-types coffer.vault.catalogue.CatalogueTool, so evals go through docs_from_tools like the CLI."""

    name: str
    server: str
    tool: str
    description: str
    input_schema: dict[str, Any] = field(default_factory=dict)
    title: str | None = None


@dataclass(frozen=True)
class Query:
    id: str
    text: str
    groups: tuple[frozenset[str], ...]
    steps: tuple[str, ...] = ()  # livemcpbench: the task's sub-goals, one line each


@dataclass(frozen=True)
class Dataset:
    name: str
    tools: list[EvalTool]
    queries: list[Query]
    note: str = ""


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _tool(row: dict[str, Any]) -> EvalTool:
    name = row["name"]
    server = row.get("server") or ""
    bare = name[len(server) + 2 :] if server and name.startswith(server + "__") else name
    schema = row.get("inputSchema") or {}
    return EvalTool(
        name=name,
        server=server,
        tool=bare,
        description=row.get("description") or "",
        input_schema=schema if isinstance(schema, dict) else {},
    )


def _groups(row: dict[str, Any]) -> tuple[frozenset[str], ...]:
    if row.get("relevant_groups"):
        return tuple(frozenset(g) for g in row["relevant_groups"])
    return tuple(frozenset([name]) for name in dict.fromkeys(row["relevant"]))


_STEP_NUMBER = re.compile(r"^\s*\d+[.)]\s*")


def _steps(text: Any) -> tuple[str, ...]:
    if not isinstance(text, str):
        return ()
    lines = (_STEP_NUMBER.sub("", line).strip() for line in text.splitlines())
    return tuple(line for line in lines if line)


def stable_order(ids: list[str], salt: str) -> list[str]:
    """A fixed pseudo-random order that depends only on the ids, not on file order or Python's hash."""
    return sorted(ids, key=lambda i: hashlib.sha256(f"{salt}:{i}".encode()).hexdigest())


def metatool_split(rows: list[dict[str, Any]], part: str) -> list[dict[str, Any]]:
    """`sample`: the 1,000 eval queries; `dev`: 2,000 other queries for tuning; `full`: all."""
    if part == "full":
        return rows
    order = stable_order([r["id"] for r in rows], "coffer-metatool")
    chosen = set(order[:METATOOL_SAMPLE] if part == "sample" else order[METATOOL_SAMPLE : METATOOL_SAMPLE + 2000])
    return [r for r in rows if r["id"] in chosen]


def load(name: str, full: bool = False, part: str | None = None) -> Dataset:
    """Load one data set. For metatool, `full` uses every query instead of the fixed sample."""
    folder = DATA_DIR / name
    if not folder.is_dir():
        raise ValueError(f"unknown data set {name!r} (known: {', '.join(DATASETS + EXTRA_DATASETS)})")
    tools_folder = DATA_DIR / _TOOLS_FROM.get(name, name)
    tools = [_tool(r) for r in _read_jsonl(tools_folder / "tools.jsonl")]
    rows = _read_jsonl(folder / "queries.jsonl")
    note = ""
    if name == "metatool":
        part = part or ("full" if full else "sample")
        rows = metatool_split(rows, part)
        if part == "sample":
            note = f"fixed sample of {len(rows)} of 21,111 queries (--full for all)"
        elif part == "dev":
            note = "dev split (tuning only)"
    queries = [
        Query(id=str(r.get("id", i)), text=r["query"], groups=_groups(r), steps=_steps(r.get("steps")))
        for i, r in enumerate(rows)
    ]
    return Dataset(name=name, tools=tools, queries=queries, note=note)


# data/out-of-vault's files: the asks the abstention rule was tuned on, those written after it was
# (2026-12-07), and those written before the brand list was built (2026-12-08, issue 60); never tuned on
OUT_OF_VAULT = {"tuned": "queries.jsonl", "held-out": "heldout.jsonl", "held-out 2": "heldout-2.jsonl"}


def out_of_vault(ds: Dataset, part: str = "tuned") -> list[str]:
    """data/out-of-vault's queries whose service no tool of `ds` names: the right answer is nothing.
    `part`: which file (`OUT_OF_VAULT`)."""
    return [query for query, _ in out_of_vault_asks(ds, part)]


def out_of_vault_asks(ds: Dataset, part: str = "tuned") -> list[tuple[str, str]]:
    """(query, the service it asks for) of `out_of_vault`."""
    text = " ".join(f"{t.name} {t.description}" for t in ds.tools).lower()
    rows = _read_jsonl(DATA_DIR / "out-of-vault" / OUT_OF_VAULT[part])
    return [(r["query"], r["service"]) for r in rows if r["service"].lower() not in text]

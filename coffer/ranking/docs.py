"""What the ranker ranks: `Doc`, a small generic record for tools and memory passages alike."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, overload

from coffer.ranking.tokenize import expand_abbreviations, split_words, tokenize


@dataclass(frozen=True)
class Doc:
    """One rankable thing.

    `id` is what callers get back (a tool's exposed name, a note's id); `name` is the short, heavily
    weighted field (a tool's own name, a note's title); `text` the body; `params` a weak extra field;
    `server` the owning server, which counts a little ("github" in "open a github issue").
    """

    id: str
    name: str
    text: str
    params: str = ""
    server: str = ""


def lead_word(text: str) -> str:
    """The word a doc's text opens with, lowercased: a tool description's verb ("Shows the commit logs")."""
    words = split_words(text[:40])
    return words[0] if words else ""


class SavedDocs(Sequence[Doc]):
    """The docs an index snapshot was built over, as ids, names and the words their texts open with
    (`lead_word`) only: a search over a restored index needs no texts, and 30,000 Doc objects cost
    more than the search (`Ranker.saved`). A Doc is made when one is asked for."""

    def __init__(self, ids: list[str], names: list[str], leads: list[str]) -> None:
        self.ids, self.names, self.leads = ids, names, leads

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, i: int) -> Doc: ...
    @overload
    def __getitem__(self, i: slice) -> list[Doc]: ...
    def __getitem__(self, i: int | slice) -> Doc | list[Doc]:
        if isinstance(i, slice):
            return [Doc(id=d, name=n, text="") for d, n in zip(self.ids[i], self.names[i], strict=True)]
        return Doc(id=self.ids[i], name=self.names[i], text="")


class ToolLike(Protocol):
    """The parts of `coffer.vault.catalogue.CatalogueTool` the ranker reads."""

    @property
    def name(self) -> str: ...
    @property
    def server(self) -> str: ...
    @property
    def tool(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def input_schema(self) -> dict[str, Any]: ...


def schema_text(schema: Any) -> str:
    """Parameter names and descriptions of a JSON schema's top-level properties."""
    if not isinstance(schema, dict):
        return ""
    props = schema.get("properties")
    if not isinstance(props, dict):
        return ""
    parts: list[str] = []
    for key, spec in props.items():
        parts.append(str(key))
        if isinstance(spec, dict) and isinstance(spec.get("description"), str):
            parts.append(spec["description"])
    return " ".join(parts)


def docs_from_tools(tools: Iterable[ToolLike]) -> list[Doc]:
    """Docs for catalogue tools: id is the exposed name, name the upstream's own tool name."""
    docs: list[Doc] = []
    for t in tools:
        title = getattr(t, "title", None)
        text = t.description or ""
        if title and title not in text:
            text = f"{title}. {text}" if text else title
        docs.append(
            Doc(
                id=t.name,
                name=getattr(t, "tool", "") or t.name,
                text=text,
                params=schema_text(getattr(t, "input_schema", None)),
                server=getattr(t, "server", "") or "",
            )
        )
    return docs


def doc_fields(doc: Doc) -> dict[str, list[str]]:
    """Tokenised BM25 fields of a doc."""
    return {
        "name": tokenize(doc.name),
        "server": tokenize(doc.server),
        "text": tokenize(doc.text),
        "params": tokenize(doc.params),
    }


def embed_text(doc: Doc) -> str:
    """The text a doc is embedded as: its name in plain words, then its body."""
    name = " ".join(split_words(doc.name))
    return expand_abbreviations(f"{name}: {doc.text}" if doc.text else name)


_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
MAX_CHUNKS = 4


def embed_chunks(doc: Doc) -> list[str]:
    """Extra per-sentence texts for a long doc (none for a doc of one or two sentences).

    A mean-pooled vector of a long description blurs its parts; scoring a doc by its best sentence
    as well lets "read a PDF" find a tool whose PDF support is the fourth sentence of twenty.
    """
    sentences = [s.strip() for s in _SENTENCE.split(doc.text) if len(s.split()) >= 3]
    if len(sentences) < 3:
        return []
    name = " ".join(split_words(doc.name))
    return [expand_abbreviations(f"{name}: {s}") for s in sentences[:MAX_CHUNKS]]


def docs_hash(docs: Sequence[Doc]) -> str:
    """Content hash of a doc list (order matters: it decides tie order)."""
    digest = hashlib.sha256()
    for doc in docs:
        for value in (doc.id, doc.name, doc.text, doc.params, doc.server):
            data = value.encode("utf-8", "surrogatepass")
            digest.update(len(data).to_bytes(8, "little"))
            digest.update(data)
    return digest.hexdigest()

"""Non-English queries through the glossary (coffer.ranking.languages), alone and through the ranker.

The queries here are not the eval sets' (evals/data/coffer-real-i18n*): those measure the glossary,
these pin its behaviour.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coffer.ranking import Doc, Ranker, search_tools
from coffer.ranking.languages import COLUMNS, GLOSSARY_FILE, detect, glossary, parse, translate
from tests.ranking.test_ranking import real_tools

EVALS = Path(__file__).resolve().parents[2] / "evals" / "data"


@pytest.mark.parametrize(
    ("query", "lang", "means"),
    [
        ("borra la carpeta temporal del proyecto", "es", {"delete", "folder", "project"}),
        ("descargar el archivo de la página", "es", {"download", "file", "page"}),
        ("lösche den temporären Ordner", "de", {"delete", "folder"}),
        ("zeige mir die letzten Nachrichten", "de", {"show", "latest", "message"}),
        ("télécharge le fichier depuis la page", "fr", {"download", "file", "page"}),
        ("liste les tables de la base de données", "fr", {"list", "table", "database"}),
        ("crie uma tarefa no projeto", "pt", {"create", "task", "project"}),
        ("elenca i file della cartella", "it", {"list", "file", "folder"}),
        ("удали старую ветку в репозитории", "ru", {"delete", "branch", "repository"}),
        ("把这个文件夹里的文件复制到服务器", "zh", {"folder", "file", "copy", "server"}),
        ("データベースのテーブルを一覧表示して", "ja", {"database", "table", "list", "show"}),
    ],
)
def test_other_languages_read_in_the_catalogues_words(query: str, lang: str, means: set[str]) -> None:
    assert detect(query) == lang
    assert means <= set(translate(query).lower().split()), translate(query)


def test_inflections_match_through_the_languages_stemmer() -> None:
    for verb in ("abre", "abrir", "abra"):
        assert translate(f"{verb} el archivo de configuración").startswith("open file configuration")
    assert translate("öffne die Datei") == translate("öffnen die Dateien") == "open file"


def test_function_words_go_names_and_paths_stay() -> None:
    out = translate("guarda el informe en salida/informe.md para el equipo de Ana")
    assert "salida/informe.md" in out and "Ana" in out and " el " not in f" {out} "
    assert translate("abre un PR para mi rama") == "open PR branch"  # "para" is "for", not "parar" (stop)


def test_chinese_and_japanese_keep_their_characters() -> None:
    out = translate("删除旧分支")  # a catalogue with Chinese descriptions still matches the original
    assert out.startswith("删除旧分支") and {"delete", "branch"} <= set(out.split())


@pytest.mark.parametrize(
    "query",
    [
        "open a PR for my branch",
        "kubectl logs pod",  # "logs" is German for logs too: one word is not evidence
        "jira ticket",
        "book a table at la piazza",
        "pasta carbonara con panna",
        "cat package.json",
        "What are the 八字 of a boy born in 2008?",  # one CJK word in an English question: nothing to read
        'how do I use the word "спасибо" in a sentence?',  # one Russian word is not a Russian query
        "Can you suggest a trendy caf\u8305 in New York?",  # mojibake, not Chinese
        "",
    ],
)
def test_english_queries_are_left_alone(query: str) -> None:
    assert translate(query) == query


def test_no_english_eval_query_is_rewritten() -> None:
    """Every English query of the eval sets (21,000+ of metatool's among them) stays as typed."""
    rewritten = []
    for name in ("coffer-real", "livemcpbench", "metatool"):
        for line in (EVALS / name / "queries.jsonl").read_text(encoding="utf-8").splitlines():
            query = json.loads(line)["query"]
            if detect(query) in {"es", "de", "fr", "pt", "it", "ru"}:
                rewritten.append(query)
    assert rewritten == []


def test_glossary_rows_are_whole() -> None:
    rows = parse(GLOSSARY_FILE.read_text(encoding="utf-8"))
    assert len(rows) >= 140 and all(all(row[c] for c in COLUMNS) for row in rows)
    assert glossary().phrases["es"] and glossary().cjk["ja"]
    with pytest.raises(ValueError, match="line 2"):
        parse("# comment\ncreate | crear | erstellen\n")


REAL = real_tools()


@pytest.mark.parametrize(
    ("query", "first"),
    [
        ("crea una solicitud de extracción", "github__create_pull_request"),
        ("lege ein neues Issue an", "github__create_issue"),
        ("crée un nouveau dépôt", "github__create_repository"),
        ("создай новый репозиторий", "github__create_repository"),
        ("为我的仓库创建一个新分支", "github__create_branch"),
    ],
)
def test_non_english_queries_find_the_obvious_tool(query: str, first: str) -> None:
    hits = [doc.id for doc, _ in search_tools(REAL, query, 5).hits]
    assert hits[0] == first, hits


def test_notes_keep_the_querys_own_words() -> None:
    """Notes may be written in the query's language: there the English is added, not substituted."""
    assert translate("abre un PR para mi rama", keep_original=True) == "abre un PR para mi rama open branch"
    assert translate("open a PR for my branch", keep_original=True) == "open a PR for my branch"
    notes = [
        Doc(id="deploy", name="Despliegue", text="Cómo desplegar el servicio de pagos: primero la base de datos"),
        Doc(id="paella", name="Paella", text="La receta de paella de la abuela, con arroz bomba"),
        Doc(id="english", name="Release", text="How we cut a release"),
    ]
    ranker = Ranker(notes, mode="bm25")  # english_docs=False, as coffer__ask's memory ranker
    hits = [d.id for d, _ in ranker.search("¿cómo despliego el servicio de pagos?", 3).hits]
    assert hits[0] == "deploy", hits
    # read as the catalogue's English only ("deploy service pay"), nothing is left to match these notes
    assert Ranker(notes, mode="bm25", english_docs=True).search("¿cómo despliego el servicio de pagos?", 3).hits == []

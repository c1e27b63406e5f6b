"""The brand list (coffer.discovery.brands): built from simple-icons' data, shipped in the package, and
the abstention's evidence for a service the registry names no server for."""

from __future__ import annotations

from coffer.discovery import brands, world
from coffer.ranking.docs import ToolLike
from evals.datasets import EvalTool

ICONS = [
    {"title": "Smartsheet", "slug": "smartsheet"},
    {"title": "Next.js", "slug": "nextdotjs", "aliases": {"aka": ["NextJS"]}},
    {"title": "Biome", "slug": "biome", "aliases": {"old": ["Rome"]}},  # a former name: a city now
    {"title": "Square", "slug": "square"},
    {"title": "X", "slug": "x"},
    {"title": "Google Ads Manager Extra", "slug": "long"},
]


def test_the_list_holds_names_as_ascii_words_without_everyday_ones() -> None:
    text = brands.build(ICONS, "1.2.3", everyday=lambda name: 5.0 if name == "square" else 1.0)
    kept = [line for line in text.splitlines() if not line.startswith("#")]
    assert kept == ["biome", "next js", "nextjs", "smartsheet"]
    assert "simple-icons 1.2.3" in text and "CC0-1.0" in text and "Left out: 1 names" in text
    assert brands.key("Métro de Paris") == "metro de paris"


def test_the_shipped_list_is_small_and_records_its_source() -> None:
    text = brands.BRANDS_FILE.read_text(encoding="utf-8")
    assert text.startswith("# Names of brands") and "simple-icons 16.37.0" in text and "CC0-1.0" in text
    assert len(text) < 40_000 and "opsgenie" in brands.brands() and "typeform" in brands.brands()
    assert "square" not in brands.brands() and "bitcoin" not in brands.brands()  # words first, or talked about


def _tools() -> list[ToolLike]:
    return [EvalTool(name="files__read_file", server="files", tool="read_file", description="Read a file from disk")]


def test_a_brand_the_vault_lacks_is_a_service_asked_for() -> None:
    """Typeform names no server of the recorded registry: the list alone says it is a service (spelled as
    a name; written in lower case it says less)."""
    empty = world.Words({}, {}, {})
    knows = world.vault_vocabulary(_tools(), lambda word: word in {"read", "file", "disk"})
    found = dict(world.services("create a survey in Typeform", knows, empty))
    assert found["typeform"] > world.THRESHOLD
    assert dict(world.services("create a survey in typeform", knows, empty))["typeform"] < world.THRESHOLD
    assert world.services("read the file about Paris", knows, empty) == []  # an argument names no brand
    assert dict(world.services("chart it with Apache ECharts", knows, empty))["apache echarts"] > world.THRESHOLD


def test_a_word_known_only_in_pieces_is_not_known() -> None:
    knows = world.vault_vocabulary(_tools(), lambda word: word in {"password", "1"})
    assert not knows("1password") and knows("password")


def test_who_makes_a_product_comes_from_its_brand_page() -> None:
    jira = {"title": "Jira", "guidelines": "https://atlassian.design/foundations/logos/"}
    assert brands.maker_of(jira) == "atlassian"
    assert brands.maker_of({"title": "Stripe", "source": "https://stripe.com/newsroom/information"}) is None  # own
    hosted = {"title": "Zapier", "guidelines": "https://www.figma.com/design/abc/Zapier-Brand"}  # a file, not its maker
    assert brands.maker_of(hosted) is None
    assert brands.maker_of({"title": "Kimi", "guidelines": "https://moonshotai.github.io/Branding-Guide"}) is None
    assert brands.maker_of({"title": "Tool", "source": "https://maker.com/some/page"}) is None  # not a brand page
    text = brands.build_makers([jira, {"title": "Confluence", "source": "https://www.atlassian.com/press-kit"}], "1")
    assert text.splitlines()[-2:] == ["confluence\tatlassian", "jira\tatlassian"]


def test_the_query_names_the_product_the_maker_makes() -> None:
    from coffer.discovery.rank import implied_makers

    assert implied_makers("link the Jira ticket to the Confluence page") == {"atlassian"}
    assert implied_makers("check the Next.js build") == {"vercel"}
    assert implied_makers("open a pull request") == set()

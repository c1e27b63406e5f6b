"""The brand list (coffer.discovery.brands): built from simple-icons' data, shipped in the package, and
the abstention's evidence for a service the registry names no server for."""

from __future__ import annotations

from pathlib import Path

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


# simple-icons 16.37.0's entries and @iconify-json/logos 1.2.20's slugs as they are, and lines of Debian's
# wamerican (/usr/share/dict/american-english) as they are: proper nouns capitalised, possessives listed
REAL_ICONS = [
    {"title": "Resend", "slug": "resend", "source": "https://resend.com/brand"},
    {"title": "Square", "slug": "square", "source": "https://squareup.com"},
    {"title": "Open Access", "slug": "openaccess"},
    {"title": "JSON Web Tokens", "slug": "jsonwebtokens", "source": "https://jwt.io"},
    {"title": "Etsy", "slug": "etsy", "source": "https://www.etsy.com/uk/press"},
    {"title": "Typeform", "slug": "typeform", "source": "https://www.typeform.com"},
]
REAL_LOGOS = ["slack", "slack-icon", "onesignal", "jwt", "google-2014", "google", "aws-lambda", "vite", "vite-dark"]
REAL_WORDS = ["Instagram", "Toyota", "access", "box", "google", "open", "resend", "slack", "square", "square's", "web"]


def test_everyday_words_are_the_lower_case_words_of_a_dictionary() -> None:
    """A word the dictionary writes in lower case is a word first, however rare ("resend": Zipf 2.1, which
    the frequency rule alone kept); a three-letter name is an abbreviation first (JWT: Zipf 2.0); a name
    the dictionary writes capitalised or lacks is a name (Etsy, Typeform)."""
    words = brands.lower_case_words(REAL_WORDS)
    assert "square" in words and "resend" in words and "toyota" not in words and "instagram" not in words
    text = brands.build(REAL_ICONS, "16.37.0", logos=(REAL_LOGOS, "1.2.20"), words=words, words_from="american-english")
    kept = [line for line in text.splitlines() if not line.startswith("#")]
    assert kept == ["aws lambda", "etsy", "json web tokens", "onesignal", "typeform", "vite"]
    assert "@iconify-json/logos 1.2.20" in text and "SVG Logos" in text and "american-english" in text
    zipf = {"resend": 2.14, "square": 4.84, "open access": 4.91, "json web tokens": 2.68, "etsy": 3.36}  # wordfreq 3.1
    old_rule = brands.build(REAL_ICONS, "16.37.0", everyday=lambda name: zipf.get(name, 0.0))
    assert "resend" in old_rule.splitlines()  # the frequency rule alone keeps an everyday word that is rare
    both = brands.build(REAL_ICONS, "16.37.0", everyday=lambda name: zipf.get(name, 0.0), words=words)
    assert [line for line in both.splitlines() if not line.startswith("#")] == ["typeform"]


def test_a_logo_s_variants_are_its_name() -> None:
    assert brands.logo_names(REAL_LOGOS) == ["aws lambda", "google", "jwt", "onesignal", "slack", "vite"]
    assert brands.logo_names(["vite-dark"]) == ["vite dark"]  # no "vite" to fold it into: the slug's words


def test_the_shipped_list_is_small_and_records_its_sources() -> None:
    text = brands.BRANDS_FILE.read_text(encoding="utf-8")
    assert text.startswith("# Names of brands") and "simple-icons 16.37.0" in text and "CC0-1.0" in text
    assert "@iconify-json/logos 1.2.20" in text and "wamerican" in text
    assert len(text) < 40_000 and "opsgenie" in brands.brands() and "typeform" in brands.brands()
    assert "onesignal" in brands.brands() and "pipedrive" in brands.brands()  # SVG Logos' names
    assert "square" not in brands.brands() and "bitcoin" not in brands.brands()  # words first, or talked about
    assert "resend" not in brands.brands() and "jwt" not in brands.brands()  # a dictionary's word; an abbreviation


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


def test_a_new_vault_without_a_registry_cache_still_knows_a_brand_it_lacks(coffer_home: Path) -> None:
    """No registry cache yet (a new vault, or no network): the shipped list alone is the evidence, so an
    ask for Typeform is not answered with the vault's nearest tools (a new user's trial found it was)."""
    from coffer.discovery import cache

    assert not cache.cache_path().exists()
    stem_known = lambda word: word in {"read", "file", "disk"}  # noqa: E731
    registries = ["https://registry.modelcontextprotocol.io"]
    elsewhere, _ = world.lacking("create a survey in Typeform", _tools(), stem_known, registries)
    assert elsewhere == ["typeform"]
    assert world.lacking("read the file about Paris", _tools(), stem_known, registries) == ([], [])

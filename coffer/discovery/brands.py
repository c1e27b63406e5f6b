"""Which words name a product or service at all: a word list built from open data, shipped in the package
(`brands.txt`), read beside the registry cache by `coffer.discovery.world`.

The registry's names say which words name servers, but only for the services someone published a server
for: "Smartsheet", "Typeform", "OneSignal" name none in it, and an ask for them looked like an ask with an
argument. The list is built from two sources, names only, lower-cased to ASCII words, one a line; its
header records each source's version and licence:

- the brands of the `simple-icons` npm package's data file (16.37.0, CC0-1.0: titles, and the names each
  is also known by);
- the icon names of the `@iconify-json/logos` npm package (1.2.20, Gil Barbara's SVG Logos, CC0-1.0),
  which still has the services simple-icons removed at their owners' request (Slack, LinkedIn): a slug's
  words ("aws-lambda": aws lambda), its variants ("slack-icon", "google-2014") folded into the name.

Left out as everyday words: a name that the lower-case entries of an English word list hold (Debian's
`wamerican` 2020.12.07, from SCOWL under SCOWL's own permissive licence; proper nouns are capitalised in
it: "square", "tower", "pocket" are words, "Etsy" is not), a name of several words each of which is one
("open access"), and a name of one word shorter than `SHORTEST` (an abbreviation first: JWT, UML, TED);
and, by the `wordfreq` package's English frequencies (3.1.1; Apache-2.0, its data CC BY-SA 4.0), a name
as frequent as everyday words (`EVERYDAY`: "Toyota", "Ethereum" and "Shopify" are talked about more than
asked of). The word list and wordfreq are read at build time only; none of their data ships.

Built by `python -m coffer.discovery.brands build simple-icons.json logos.json` (the data files from
`npm pack simple-icons` and `npm pack @iconify-json/logos`), never at run time.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import json
import re
import sys
import textwrap
import unicodedata
from collections.abc import Callable, Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

BRANDS_FILE = Path(__file__).with_name("brands.txt")
MAKERS_FILE = Path(__file__).with_name("makers.txt")  # "jira<TAB>atlassian": who makes a product
EVERYDAY = 2.5  # Zipf frequency (once per three million words of English) from which a name is talked about
LONGEST = 3  # words in the longest name matched ("Google Ads Manager"); longer names are left out
SHORTEST = 4  # letters in the shortest one-word name: "JWT", "UML" and "TED" are abbreviations first
WORD_LIST = Path("/usr/share/dict/american-english")  # Debian's wamerican (SCOWL): proper nouns capitalised
# a logo's variants, not names: "slack-icon", "google-2014", "vite-dark"
_VARIANTS = frozenset(
    {"icon", "wordmark", "dark", "light", "monochrome", "monochromatic", "color", "classic", "official", "old"}
    | {"alt", "mono", "horizontal", "vertical", "round"}
)
_WORDS = re.compile(r"[a-z0-9]+")


def key(name: str) -> str:
    """A name as the list holds it: ASCII, lower case, its words joined by one space ("Next.js": next js)."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    return " ".join(_WORDS.findall(ascii_name.lower()))


def names_of(icon: dict[str, Any]) -> list[str]:
    """An icon's title and the names it is also known by (`aka`, duplicates' titles, local names); not
    its former names (`old`: Biome was "Rome", a city now)."""
    aliases = icon.get("aliases") or {}
    names = [str(icon.get("title") or ""), *map(str, aliases.get("aka") or [])]
    names += [str(dup.get("title") or "") for dup in aliases.get("dup") or []]
    names += [str(local) for local in (aliases.get("loc") or {}).values()]
    return names


def logo_names(slugs: Iterable[str]) -> list[str]:
    """The names of an Iconify set's icons (`@iconify-json/logos`): each slug's words, its variants
    ("slack-icon", "google-2014", "vite-dark") folded into the name they vary ("slack", "google", "vite")."""
    every = set(slugs)
    names = set()
    for slug in every:
        parts = slug.split("-")
        while len(parts) > 1 and (parts[-1] in _VARIANTS or parts[-1].isdigit()) and "-".join(parts[:-1]) in every:
            parts = parts[:-1]
        names.add(" ".join(parts))
    return sorted(names)


def lower_case_words(lines: Iterable[str]) -> frozenset[str]:
    """The everyday words of a word list in which proper nouns are capitalised (`/usr/share/dict/words`):
    its entries written in lower case ("square", "tower"; not "Toyota"), possessives ("'s") left out."""
    return frozenset(w for w in (line.strip() for line in lines) if w and w == w.lower() and not w.endswith("'s"))


def is_everyday(
    name: str, words: frozenset[str] = frozenset(), frequency: Callable[[str], float] | None = None
) -> bool:
    """Whether a key is a word before it is a brand: one word shorter than `SHORTEST`, or one the everyday
    `words` hold ("square"), or several that all are (or are stopwords or numbers: "open access", "the
    conversation"); or, with `frequency` (a Zipf frequency in English), at `EVERYDAY` or above."""
    from coffer.ranking.tokenize import STOPWORDS

    parts = name.split()
    if len(parts) == 1 and len(parts[0]) < SHORTEST:
        return True
    if words and all(p in words or (len(parts) > 1 and (p in STOPWORDS or p.isdigit())) for p in parts):
        return True
    return frequency is not None and frequency(name) >= EVERYDAY


def build(
    icons: Iterable[dict[str, Any]],
    version: str,
    everyday: Callable[[str], float] | None = None,
    *,
    logos: tuple[Iterable[str], str] | None = None,
    words: frozenset[str] = frozenset(),
    words_from: str = "",
    frequency_from: str = "wordfreq",
) -> str:
    """The list's text from simple-icons' data and (`logos`: the slugs of `@iconify-json/logos` and its
    version) the SVG Logos' names: one key a line, sorted; a name of at most `LONGEST` words with three
    letters at least ("1+1" and "X" are no word to tell a service by). Left out: what `is_everyday` says
    by the everyday `words` (read from `words_from`) and `everyday` (a name's Zipf frequency)."""
    names = [name for icon in icons for name in names_of(icon)]
    if logos is not None:
        names += logo_names(logos[0])
    keys = set()
    for name in names:
        parts = key(name).split()
        letters = sum(c.isalpha() for w in parts for c in w)
        if not parts or len(parts) > LONGEST or letters < 3:
            continue
        keys.add(" ".join(parts))
    kept = sorted(k for k in keys if not is_everyday(k, words, everyday))
    header = (
        f"# Names of brands, products and services: simple-icons {version} (npm), data/simple-icons.json,\n"
        "# CC0-1.0 (https://github.com/simple-icons/simple-icons): titles and aliases (aka, dup, loc)"
    )
    if logos is not None:
        header += (
            f";\n# @iconify-json/logos {logos[1]} (npm), icons.json, SVG Logos by Gil Barbara, CC0-1.0\n"
            "# (https://github.com/gilbarbara/logos): icon names, variants folded"
        )
    header += (
        " as\n# lower-case ASCII words, built by `python -m coffer.discovery.brands build`; do not edit by hand.\n"
    )
    left_out = f"Left out: {len(keys) - len(kept)} names, everyday words first: one word of under {SHORTEST} letters"
    if words:
        where = words_from or "a word list"
        left_out += f", a word (or words) written in lower case in {where}, where proper nouns are capitalised"
    if everyday is not None:
        left_out += f", a name as frequent as everyday words (Zipf {EVERYDAY} or more in English, by {frequency_from})"
    left_out += "; read at build time only, none of their data is here."
    header += "".join(f"# {line}\n" for line in textwrap.wrap(left_out, 100))
    return header + "".join(f"{k}\n" for k in kept)


_CODE_HOSTS = ("github.com", "githubusercontent.com", "gitlab.com", "github.io")  # an account's files: anyone's brand
_BRAND_PAGE = re.compile(r"brand|press|logo|media|identity|trademark", re.IGNORECASE)
_SECOND_LEVEL = frozenset({"co", "com", "org", "net", "ac", "gov", "edu"})


def maker_of(icon: dict[str, Any]) -> str | None:
    """Who makes the brand, by the site of its brand page: the domain of its brand guidelines, or of a
    source that is a brand, press or logo page (Jira's atlassian.design: atlassian; Next.js's
    vercel.com/design/brands: vercel). A page whose address names the brand itself (Zapier's guidelines
    in a Figma file, a project's page on notion.site) is hosted there, not made there; None then, and
    where the domain is the brand's own."""
    from urllib.parse import urlsplit

    title = key(str(icon.get("title") or ""))
    own = {w for w in title.split() if len(w) >= 4} | {title.replace(" ", "")}
    for url in (icon.get("guidelines"), icon.get("source")):
        if not isinstance(url, str) or not url.startswith("http"):
            continue
        parts = urlsplit(url)
        if url != icon.get("guidelines") and not _BRAND_PAGE.search(parts.path):
            continue  # a logo found elsewhere (a design file, a project's site) says nothing of its maker
        host = (parts.hostname or "").lower()
        labels = [x for x in host.split(".") if x != "www"]
        at = len(labels) - (3 if len(labels) >= 3 and labels[-2] in _SECOND_LEVEL else 2)
        address = re.sub(r"[^a-z0-9]", "", ".".join(labels[:at]) + parts.path.lower())
        domain = re.sub(r"[^a-z0-9]", "", "".join(labels[max(at, 0) :]))
        if at < 0 or host.endswith(_CODE_HOSTS) or domain in own or any(word in address for word in own):
            return None
        label = re.sub(r"[^a-z0-9]", "", labels[at])
        return label if len(label) >= 3 and label not in own and label not in title.split() else None
    return None


def build_makers(icons: Iterable[dict[str, Any]], version: str) -> str:
    """The maker list's text: "name<TAB>maker" for each name whose maker is another name (`maker_of`)."""
    pairs = set()
    for icon in icons:
        maker = maker_of(icon)
        if maker is None:
            continue
        for name in names_of(icon):
            words = key(name).split()
            if words and len(words) <= LONGEST and sum(c.isalpha() for w in words for c in w) >= 3:
                pairs.add((" ".join(words), maker))
    header = (
        f"# Who makes a product: simple-icons {version} (npm), CC0-1.0, each name with the domain (or code host\n"
        "# account) its logo's guidelines or source come from, where that is not the name's own; built by\n"
        "# `python -m coffer.discovery.brands build`; do not edit by hand. Read by `coffer find`.\n"
    )
    return header + "".join(f"{name}\t{maker}\n" for name, maker in sorted(pairs))


@lru_cache(maxsize=1)
def makers() -> dict[str, str]:
    """The shipped maker list: name -> its maker's label (empty where the file is missing)."""
    try:
        lines = MAKERS_FILE.read_text(encoding="utf-8").splitlines()
    except OSError:
        return {}
    return dict(line.split("\t", 1) for line in lines if line and not line.startswith("#") and "\t" in line)


@lru_cache(maxsize=1)
def brands() -> frozenset[str]:
    """The shipped list (empty where the file is missing: then only the registry's names count)."""
    try:
        text = BRANDS_FILE.read_text(encoding="utf-8")
    except OSError:
        return frozenset()
    return frozenset(line for line in text.splitlines() if line and not line.startswith("#"))


def main(argv: list[str]) -> int:
    """`build SIMPLE_ICONS_JSON [LOGOS_ICONS_JSON]`: write `brands.txt` (and `makers.txt`) from
    simple-icons' data file and the SVG Logos' `icons.json`, leaving out everyday words by the word list
    `WORD_LIST` (`apt install wamerican`) and the `wordfreq` package's English frequencies (`pip install
    wordfreq`), each where it is installed; their versions are read from the package.json beside each file."""
    if len(argv) < 2 or argv[0] != "build":
        print("usage: python -m coffer.discovery.brands build simple-icons.json [logos/icons.json]", file=sys.stderr)
        return 2
    data = Path(argv[1])
    icons = json.loads(data.read_text(encoding="utf-8"))
    icons = icons if isinstance(icons, list) else icons["icons"]
    logos = None
    if len(argv) > 2:
        logo_file = Path(argv[2])
        logos = (list(json.loads(logo_file.read_text(encoding="utf-8"))["icons"]), _version_beside(logo_file))
    everyday = None
    frequency_from = "wordfreq"
    try:  # a build-time tool, never a dependency of Coffer
        wordfreq = importlib.import_module("wordfreq")
        everyday = functools.partial(wordfreq.zipf_frequency, lang="en")
        frequency_from = f"wordfreq {importlib.metadata.version('wordfreq')} (PyPI; Apache-2.0, data CC BY-SA 4.0)"
    except ImportError:
        print("wordfreq is not installed: no name is left out for its frequency", file=sys.stderr)
    words: frozenset[str] = frozenset()
    if WORD_LIST.exists():
        words = lower_case_words(WORD_LIST.read_text(encoding="utf-8").splitlines())
    else:
        print(f"{WORD_LIST} is missing (apt install wamerican): no dictionary word is left out", file=sys.stderr)
    version = _version_beside(data)
    BRANDS_FILE.write_text(
        build(
            icons,
            version,
            everyday,
            logos=logos,
            words=words,
            words_from=_word_list_source(),
            frequency_from=frequency_from,
        ),
        encoding="utf-8",
    )
    MAKERS_FILE.write_text(build_makers(icons, version), encoding="utf-8")
    return 0


def _word_list_source() -> str:
    """`WORD_LIST` with the Debian package that installs it and its version, where dpkg says."""
    import subprocess

    try:
        found = subprocess.run(
            ["dpkg-query", "-S", str(WORD_LIST)], capture_output=True, text=True, check=True, timeout=30
        ).stdout
        package = found.split(":", 1)[0].strip()
        version = subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True, check=True, timeout=30
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return str(WORD_LIST)
    return f"{WORD_LIST}, Debian's {package} {version} (SCOWL; SCOWL's own permissive licence)"


def _version_beside(data: Path) -> str:
    """The version in the package.json of the unpacked npm package the data file came from."""
    for folder in (data.parent, data.parent.parent):
        manifest = folder / "package.json"
        if manifest.exists():
            return str(json.loads(manifest.read_text(encoding="utf-8")).get("version", "unknown"))
    return "unknown"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Which words name a product or service at all: a word list built from open data, shipped in the package
(`brands.txt`), read beside the registry cache by `coffer.discovery.world`.

The registry's names say which words name servers, but only for the services someone published a server
for: "Smartsheet", "Typeform", "FedEx" name none in it, and an ask for them looked like an ask with an
argument. The list is the brands of the `simple-icons` npm package's data file (CC0-1.0: titles, and the
names each is also known by), lower-cased to ASCII words, one a line; its header records the package's
version and licence. Built by `python -m coffer.discovery.brands build simple-icons.json` (the file from
`npm pack simple-icons`), never at run time.
"""

from __future__ import annotations

import functools
import importlib
import json
import re
import sys
import unicodedata
from collections.abc import Callable, Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

BRANDS_FILE = Path(__file__).with_name("brands.txt")
MAKERS_FILE = Path(__file__).with_name("makers.txt")  # "jira<TAB>atlassian": who makes a product
EVERYDAY = 2.5  # Zipf frequency (once per three million words of English) from which a name is talked about
LONGEST = 3  # words in the longest name matched ("Google Ads Manager"); longer names are left out
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


def build(icons: Iterable[dict[str, Any]], version: str, everyday: Callable[[str], float] | None = None) -> str:
    """The list's text from simple-icons' data: one key a line, sorted; a name of at most `LONGEST` words
    with three letters at least ("1+1" and "X" are no word to tell a service by). With `everyday` (a
    name's Zipf frequency in English text), names at `EVERYDAY` or above are left out: "Square", "Box"
    and "Tower" are words first, "Toyota" and "Bitcoin" are talked about more than served; a rarer name
    ("Smartsheet", "Opsgenie") says a service by itself."""
    keys = set()
    for icon in icons:
        for name in names_of(icon):
            words = key(name).split()
            letters = sum(c.isalpha() for w in words for c in w)
            if not words or len(words) > LONGEST or letters < 3 or (len(words) == 1 and len(words[0]) < 3):
                continue
            keys.add(" ".join(words))
    kept = sorted(k for k in keys if everyday is None or everyday(k) < EVERYDAY)
    header = (
        f"# Names of brands, products and services: simple-icons {version} (npm), data/simple-icons.json,\n"
        "# CC0-1.0 (https://github.com/simple-icons/simple-icons): titles and aliases (aka, dup, loc) as\n"
        "# lower-case ASCII words, built by `python -m coffer.discovery.brands build`; do not edit by hand.\n"
    )
    if everyday is not None:
        header += (
            f"# Left out: {len(keys) - len(kept)} names as frequent as everyday words (Zipf {EVERYDAY} or more in\n"
            "# English, by the wordfreq package's frequencies at build time; none of its data is here).\n"
        )
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
    """`build DATA_FILE [VERSION]`: write `brands.txt` from simple-icons' data file, leaving out everyday
    words by the `wordfreq` package's English frequencies where it is installed (`pip install wordfreq`)."""
    if len(argv) < 2 or argv[0] != "build":
        print("usage: python -m coffer.discovery.brands build simple-icons.json [VERSION]", file=sys.stderr)
        return 2
    data = Path(argv[1])
    version = argv[2] if len(argv) > 2 else _version_beside(data)
    icons = json.loads(data.read_text(encoding="utf-8"))
    everyday = None
    try:  # a build-time tool, never a dependency of Coffer
        wordfreq = importlib.import_module("wordfreq")
        everyday = functools.partial(wordfreq.zipf_frequency, lang="en")
    except ImportError:
        print("wordfreq is not installed: no everyday word is left out", file=sys.stderr)
    text = build(icons if isinstance(icons, list) else icons["icons"], version, everyday)
    BRANDS_FILE.write_text(text, encoding="utf-8")
    MAKERS_FILE.write_text(
        build_makers(icons if isinstance(icons, list) else icons["icons"], version), encoding="utf-8"
    )
    return 0


def _version_beside(data: Path) -> str:
    """The version in the package.json of the unpacked npm package the data file came from."""
    for folder in (data.parent, data.parent.parent):
        manifest = folder / "package.json"
        if manifest.exists():
            return str(json.loads(manifest.read_text(encoding="utf-8")).get("version", "unknown"))
    return "unknown"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

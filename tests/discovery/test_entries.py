"""Entries and launch plans from the 33 recorded real server.json files (tests/data/registry): every one
reads, short names are what a user would type, and each way of running builds the line the publisher's
docs give, pinned, with secrets kept off the command line."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from coffer.discovery.entries import DiscoveryError, parse_item, short_name
from coffer.discovery.launch import plan
from tests.fixtures.registry_server import recorded

REG = "http://127.0.0.1:1"


def entry(name: str, docker: bool = True, **changes: Any) -> Any:
    server = copy.deepcopy(next(s for s in recorded() if s["name"] == name))
    server.update(changes)
    return parse_item({"server": server}, REG)


def test_every_recorded_entry_reads_and_has_a_distinct_name() -> None:
    servers = recorded()
    assert len(servers) >= 30
    entries = [parse_item({"server": s, "_meta": {}}, REG) for s in servers]
    assert len({e.name for e in entries}) == len(servers)
    kinds = {k.split(":")[0] for e in entries for k in e.kinds}
    assert {"npm", "pypi", "oci", "remote"} <= kinds


@pytest.mark.parametrize(
    ("name", "short"),
    [
        ("io.github.github/github-mcp-server", "github"),
        ("io.github.modelcontextprotocol/server-time", "time"),
        ("com.neon/mcp", "neon"),
        ("com.cloudflare.mcp/mcp", "cloudflare"),
        ("io.github.upstash/context7", "context7"),
        ("io.github.GLips/Figma-Context-MCP", "figma"),
        ("io.github.brave/brave-search-mcp-server", "brave-search"),
    ],
)
def test_short_names_are_what_a_user_would_type(name: str, short: str) -> None:
    assert short_name(name) == short


def test_a_bad_entry_is_refused_with_why() -> None:
    with pytest.raises(DiscoveryError, match="no valid name"):
        parse_item({"server": {"name": "db-metadata-extractor-mcp", "version": "1.0.0"}}, REG)
    with pytest.raises(DiscoveryError, match="no version"):
        parse_item({"server": {"name": "io.github.a/b"}}, REG)
    with pytest.raises(DiscoveryError, match="not a JSON object"):
        parse_item("not an object", REG)


def test_publisher_meta_gives_tools_and_network_hosts() -> None:
    thv = entry("io.github.stacklok/sequentialthinking")
    assert [t.name for t in thv.tools] == ["sequentialthinking"]
    assert "sequentialthinking" in thv.text() and "reflective problem-solving" in thv.text()
    assert thv.hosts == []  # its outbound table allows nothing
    server = copy.deepcopy(thv.server)
    image = next(iter(server["_meta"]["io.modelcontextprotocol.registry/publisher-provided"]["io.github.stacklok"]))
    meta = server["_meta"]["io.modelcontextprotocol.registry/publisher-provided"]["io.github.stacklok"][image]
    meta["permissions"]["network"]["outbound"] = {"allow_host": [".github.com", "api.example.com"]}
    assert parse_item({"server": server}, REG).hosts == ["github.com", "*.github.com", "api.example.com"]


def test_npm_and_pypi_are_pinned_to_the_entry_version() -> None:
    assert plan(entry("io.github.modelcontextprotocol/server-time")).command({}) == ["uvx", "mcp-server-time==0.6.2"]
    seq = plan(entry("io.github.modelcontextprotocol/server-sequential-thinking"))
    assert seq.command({}) == ["npx", "-y", "@modelcontextprotocol/server-sequential-thinking@0.6.2"]
    # the package's own version wins over the entry's (context7: entry 1.0.0, package 1.0.26)
    assert plan(entry("io.github.upstash/context7")).command({})[-1] == "@upstash/context7-mcp@1.0.26"


def test_required_arguments_and_variables_are_inputs() -> None:
    fs = plan(entry("io.github.modelcontextprotocol/server-filesystem"))
    assert [(i.name, i.required, i.secret) for i in fs.inputs.values()] == [("allowed_directory", True, False)]
    assert [i.name for i in fs.missing({})] == ["allowed_directory"]
    assert fs.command({"allowed_directory": "/tmp/x"})[-1] == "/tmp/x"
    figma = plan(entry("io.github.GLips/Figma-Context-MCP"))
    assert figma.inputs["FIGMA_API_KEY"].secret and figma.inputs["FIGMA_API_KEY"].required
    assert figma.environment({"FIGMA_API_KEY": "${secret:figma.FIGMA_API_KEY}"}) == {
        "FIGMA_API_KEY": "${secret:figma.FIGMA_API_KEY}"
    }
    assert figma.command({})[-1] == "--stdio"


def test_oci_moves_secrets_from_docker_arguments_into_the_env() -> None:
    gh = plan(entry("io.github.github/github-mcp-server"), docker=True)
    line = gh.command({"token": "${secret:github.token}"})
    assert line == ["docker", "run", "-i", "--rm", "-e", "GITHUB_PERSONAL_ACCESS_TOKEN",
                    "ghcr.io/github/github-mcp-server:0.24.0"]  # fmt: skip
    assert gh.environment({"token": "${secret:github.token}"}) == {
        "GITHUB_PERSONAL_ACCESS_TOKEN": "${secret:github.token}"
    }
    # an optional variable left unanswered leaves out its whole `-e NAME` (terraform's TFE_TOKEN)
    tf = plan(entry("io.github.hashicorp/terraform-mcp-server"), docker=True)
    assert "TFE_TOKEN" not in tf.command({}) and "TFE_TOKEN" not in tf.environment({})


def test_what_cannot_run_here_says_why() -> None:
    with pytest.raises(DiscoveryError, match="docker is not installed"):
        plan(entry("io.github.github/github-mcp-server"), docker=False)
    with pytest.raises(DiscoveryError, match="serves streamable-http itself"):
        plan(entry("io.github.0xChron/polymarket-mcp"))
    # a secret that could only go on a command line is refused, never written where /proc shows it
    leaky = entry("io.github.modelcontextprotocol/server-time")
    leaky.server["packages"][0]["packageArguments"] = [
        {"type": "named", "name": "--token", "value": "{token}", "variables": {"token": {"isSecret": True}}}
    ]
    with pytest.raises(DiscoveryError, match="on its command line"):
        plan(leaky)
    # falls back in order: exa's npm package first, its sse remote is not streamable HTTP
    assert plan(entry("io.github.exa-labs/exa-mcp-server")).via == "npm"
    with pytest.raises(DiscoveryError, match="'sse' remote"):
        plan(entry("io.github.exa-labs/exa-mcp-server"), via="remote")


def test_remotes_take_urls_and_secret_headers() -> None:
    apify = plan(entry("com.apify/apify-mcp-server"))
    assert apify.via == "remote" and apify.url == "https://mcp.apify.com/"
    assert apify.inputs["Authorization"].required and apify.inputs["Authorization"].secret
    assert apify.header_values({"Authorization": "${secret:apify.Authorization}"}) == {
        "Authorization": "${secret:apify.Authorization}"
    }
    neon = plan(entry("com.neon/mcp"))
    assert neon.url == "https://mcp.neon.tech/mcp" and neon.header_values({}) == {}

"""The confinement policy as Coffer decides it: the registry's `sandbox` values, `coffer add`'s flags, what
`auto` gives known servers and what a launch line names, the proxy's host rule, and the bwrap line."""

from __future__ import annotations

import itertools
import os
import sys
from pathlib import Path

import pytest

from coffer.errors import RegistryError, UsageError
from coffer.trust import pinhash
from coffer.upstreams import egress, sandbox
from coffer.vault import registry
from coffer.vault.servers import sandbox_from


def cfg(command: str = "node", *args: str, **kw: object) -> registry.ServerConfig:
    return registry.ServerConfig(name="s", command=command, args=list(args), **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ("sometimes", 'must be "auto", "off" or a table'),
        (3, 'must be "auto", "off" or a table'),
        ({"netwrk": "none"}, "unknown keys: netwrk"),
        ({"network": "some"}, 'network must be "all", "none" or a list of host names'),
        ({"network": ["bad host"]}, "list of host names"),
        ({"network": []}, "list of host names"),
        ({"read": "/etc"}, "read must be a list of paths"),
        ({"write": [""]}, "write must be a list of paths"),
    ],
)
def test_bad_sandbox_values_are_one_clear_error(value: object, error: str) -> None:
    with pytest.raises(RegistryError, match=error):
        sandbox_from(value, "coffer.toml: servers.s.sandbox")


def test_sandbox_values_round_trip_through_the_registry(coffer_home: Path) -> None:
    path = coffer_home / "coffer.toml"
    table = {"network": ["api.github.com", "*.example.com:8443"], "write": ["/srv/data"]}
    registry.add_server(cfg("node", "a.js", sandbox=table), path=path)
    registry.add_server(registry.ServerConfig(name="t", command="x", sandbox="off"), path=path)
    registry.add_server(registry.ServerConfig(name="u", command="x"), path=path)
    text = path.read_text()
    assert 'sandbox = "off"' in text and text.count("sandbox") == 2  # auto, the default, is not written
    reg = registry.load(path)
    assert reg.get("s").sandbox == table and reg.get("t").sandbox == "off" and reg.get("u").sandbox == "auto"


def test_a_new_policy_is_a_new_launch_config_but_auto_keeps_old_approvals() -> None:
    plain = cfg("node", "a.js")
    assert "sandbox" not in pinhash.config_definition(plain)  # approvals from before confinement still hold
    assert pinhash.config_hash(plain) != pinhash.config_hash(cfg("node", "a.js", sandbox="off"))
    assert pinhash.config_hash(cfg("node", "a.js", sandbox={"network": "none"})) != pinhash.config_hash(plain)


def test_add_flags_become_the_sandbox_value(tmp_path: Path) -> None:
    assert registry.sandbox_option(None, None, None, None) == "auto"
    assert registry.sandbox_option("off", None, None, None) == "off"
    assert registry.sandbox_option("none", None, [str(tmp_path)], None) == {"network": "none", "write": [str(tmp_path)]}
    assert registry.sandbox_option(None, None, None, ["API.github.com"]) == {"network": ["api.github.com"]}
    for bad in (("off", ["/x"], None, None), ("none", None, None, ["a.com"]), ("maybe", None, None, None)):
        with pytest.raises(UsageError):
            registry.sandbox_option(*bad)
    with pytest.raises(UsageError, match="invalid --allow-host 'bad host'"):
        registry.sandbox_option(None, None, None, ["bad host"])


def test_auto_fits_known_servers(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    fs = sandbox.policy_for(cfg("npx", "-y", "@modelcontextprotocol/server-filesystem", str(repo)))
    assert fs.named == (str(repo),) and fs.network == "all" and "filesystem" in fs.why
    git = sandbox.policy_for(cfg("mcp-server-git", "--repository", str(repo)))
    assert git.write == (str(repo),) and git.network == "none"
    assert sandbox.policy_for(cfg("uvx", "mcp-server-git", "-r", str(repo))).network == "all"  # uvx fetches it
    assert sandbox.policy_for(cfg("/x/node_modules/.bin/mcp-server-sequential-thinking")).network == "none"
    assert sandbox.policy_for(cfg("npx", "-y", "@modelcontextprotocol/server-memory")).network == "all"
    kube = sandbox.policy_for(cfg("mcp-server-kubernetes"))
    assert kube.read == (os.path.expanduser("~/.kube"),)
    other = sandbox.policy_for(cfg("npx", "-y", "@upstash/context7-mcp"))
    assert other == sandbox.Policy() and not other.off
    assert sandbox.policy_for(cfg("x", sandbox="off")).off


def test_what_the_launch_line_names_is_granted_and_nothing_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    data, script, tool = tmp_path / "data.json", tmp_path / "server.py", tmp_path / "tool"
    for f in (data, script, tool):
        f.write_text("x")
    tool.chmod(0o755)
    new_db = tmp_path / "sub" / "new.db"
    new_db.parent.mkdir()
    policy = sandbox.policy_for(
        cfg(
            sys.executable,
            str(script),
            f"--data={data}",
            str(tool),
            "--db",
            str(new_db),
            f"--out={tmp_path / 'home' / 'x.txt'}",  # would open the home directory: not granted
            env={"STATE": str(tmp_path / "state.json"), "TOKEN": "${secret:t}"},
            cwd=str(tmp_path),
        )
    )
    assert set(policy.named) == {str(tmp_path), str(data), str(new_db.parent)} and not policy.write


def test_the_proxy_allows_named_hosts_on_their_ports_only() -> None:
    hosts = ("api.github.com", "*.example.com", "localhost:8080")
    assert egress.allowed(hosts, "API.GitHub.com", 443) and egress.allowed(hosts, "api.github.com", 80)
    assert not egress.allowed(hosts, "api.github.com", 22)
    assert egress.allowed(hosts, "a.b.example.com", 443) and not egress.allowed(hosts, "example.com", 443)
    assert not egress.allowed(hosts, "evil-example.com", 443)
    assert egress.allowed(hosts, "localhost", 8080) and not egress.allowed(hosts, "localhost", 443)
    assert egress.target(b"CONNECT api.github.com:443 HTTP/1.1\r\nHost: x\r\n\r\n") == (
        "CONNECT",
        "api.github.com",
        443,
        b"",
    )
    method, host, port, head = egress.target(b"GET http://a.example.com/p?q=1 HTTP/1.1\r\nHost: a\r\n\r\n") or ("",) * 4
    assert (method, host, port) == ("GET", "a.example.com", 80) and head.startswith(b"GET /p?q=1 HTTP/1.1\r\n")
    assert egress.target(b"GET /relative HTTP/1.1\r\n\r\n") is None


@pytest.mark.skipif(not sandbox.support().available, reason="no bubblewrap here")
def test_the_bwrap_line_hides_before_it_grants_inside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A grant that holds a hidden path is bound before the hiding; one inside a hidden path after it."""
    home = tmp_path / "home"
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "config").write_text("[default]\n")
    monkeypatch.setenv("HOME", str(home))
    policy = sandbox.Policy(read=(str(home / ".aws" / "config"),), write=(str(home),))
    line = sandbox.wrap(["/bin/true"], policy, str(tmp_path / "tmp"), None)
    at = {(a, b): i for i, (a, b) in enumerate(itertools.pairwise(line))}
    hide, grant_home = at[("--tmpfs", str(home / ".aws"))], at[("--bind", str(home))]
    grant_inside = at[("--ro-bind", str(home / ".aws" / "config"))]
    assert grant_home < hide < grant_inside < at[("--remount-ro", str(home / ".aws"))]
    assert line[-2:] == ["--", "/bin/true"]

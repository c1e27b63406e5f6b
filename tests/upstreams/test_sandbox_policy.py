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
    assert other == sandbox.Policy() and not other.off and other.network == "all"
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
    assert set(policy.code) == {str(tmp_path)}, "the code it runs is readable (its folder), never writable"


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


def _start(tmp_path: Path, policy: sandbox.Policy, mechanism: str, monkeypatch: pytest.MonkeyPatch) -> sandbox.Start:
    found = sandbox.Support("/usr/bin/bwrap" if mechanism == "bubblewrap" else None, 7, True)
    monkeypatch.setattr(sandbox, "support", lambda: found)
    return sandbox.prepare(cfg(sys.executable, "-c", "pass"), policy, sys.executable, {"PATH": "/usr/bin"})


@pytest.mark.parametrize("mechanism", ["bubblewrap", "landlock"])
def test_a_grant_that_holds_a_secret_place_still_hides_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mechanism: str
) -> None:
    """A grant of ~ hides ~/.aws and an agent's config; a grant inside a secret place (~/.aws/config) holds
    only where it is named as one (`--allow-secret`): a plain read grant of it is dropped."""
    home = tmp_path / "home"
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "config").write_text("[default]\n")
    (home / ".aws" / "credentials").write_text("key\n")
    (home / ".claude.json").write_text("{}")
    (home / "notes.txt").write_text("mine")
    monkeypatch.setenv("HOME", str(home))
    unnamed = _start(
        tmp_path, sandbox.Policy(read=(str(home / ".aws" / "config"),), write=(str(home),)), mechanism, monkeypatch
    )
    assert not unnamed.visible(str(home / ".aws" / "config")) and unnamed.visible(str(home / "notes.txt"))
    config = str(home / ".aws" / "config")
    start = _start(tmp_path, sandbox.Policy(secrets=(config,), write=(str(home),)), mechanism, monkeypatch)
    assert start.visible(str(home / "notes.txt")) and start.writable(str(home / "notes.txt"))
    assert not start.visible(str(home / ".aws" / "credentials")) and not start.visible(str(home / ".claude.json"))
    assert start.visible(str(home / ".aws" / "config"))
    if mechanism == "landlock":  # Landlock cannot deny inside an allowed folder: the grant is carved around it
        allowed = start.read + start.write
        assert str(home) not in allowed and str(home / "notes.txt") in allowed
        assert str(home / ".aws" / "config") in allowed and str(home / ".aws" / "credentials") not in allowed
        assert start.env["HOME"] == start.home and start.home != str(home)
        return
    line = start.confine(["/bin/true"])
    at = {(a, b): i for i, (a, b) in enumerate(itertools.pairwise(line))}
    home_bind, grant = at[("--bind", str(home))], at[("--ro-bind", str(home / ".aws" / "config"))]
    hide = at[("--tmpfs", str(home / ".aws"))]
    assert home_bind < hide < grant < at[("--remount-ro", str(home / ".aws"))]
    assert start.home_at == start.home == start.env["HOME"], "the user's home is granted: its own is at its own path"
    assert ("--bind", start.home) in at
    assert ("--ro-bind", "/dev/null") in at and line[-2:] == ["--", "/bin/true"]
    assert ("--ro-bind", "/") not in at, "reads are an allow-list, not the whole filesystem"


@pytest.mark.parametrize("mechanism", ["bubblewrap", "landlock"])
def test_the_default_network_is_web_ports_and_grants(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mechanism: str
) -> None:
    assert _start(tmp_path, sandbox.Policy(), mechanism, monkeypatch).ports == [53, 80, 443]
    assert _start(tmp_path, sandbox.Policy(ports=(5432,)), mechanism, monkeypatch).ports == [53, 80, 443, 5432]
    hosts = _start(tmp_path, sandbox.Policy(network=("api.github.com", "db.local:5432")), mechanism, monkeypatch)
    none = _start(tmp_path, sandbox.Policy(network="none"), mechanism, monkeypatch)
    if mechanism == "bubblewrap":  # its own network namespace decides
        assert hosts.ports is None and none.ports is None
    else:
        assert hosts.ports == [53, 80, 443, 5432] and none.ports == []


def test_local_urls_on_the_launch_line_open_their_ports() -> None:
    policy = sandbox.policy_for(cfg("node", "--db", "postgres://localhost:5432/x", "--api=https://api.example.com"))
    assert policy.ports == (5432,)


def test_allow_host_for_a_local_service_is_a_port_and_edit_adds_to_grants(tmp_path: Path) -> None:
    assert registry.sandbox_option(None, None, None, ["localhost:5432"]) == {"ports": [5432]}
    assert registry.sandbox_option(None, None, None, ["api.github.com", "localhost:8080"]) == {
        "network": ["api.github.com", "localhost:8080"]
    }
    base = {"network": ["api.github.com"], "read": ["/srv/a"]}
    merged = registry.merge_sandbox(base, None, [str(tmp_path)], None, ["uploads.github.com"])
    assert merged == {"network": ["api.github.com", "uploads.github.com"], "read": ["/srv/a", str(tmp_path)]}
    assert registry.merge_sandbox(base, "none", None, None, None) == {"network": "none", "read": ["/srv/a"]}
    assert registry.merge_sandbox(base, "auto", None, None, None) == "auto"
    assert registry.merge_sandbox(base, "off", None, None, None) == "off"
    with pytest.raises(UsageError, match="unconfined"):
        registry.merge_sandbox("off", None, [str(tmp_path)], None, None)


def test_a_host_list_for_a_runner_gets_its_registry_hosts() -> None:
    policy = sandbox.policy_for(cfg("uvx", "mcp-server-fetch", sandbox={"network": ["pypi.org"]}))
    assert policy.network == ("pypi.org", "files.pythonhosted.org")
    npx = sandbox.policy_for(cfg("npx", "-y", "x", sandbox={"network": ["api.example.com"]}))
    assert npx.network == ("api.example.com", "registry.npmjs.org")


def test_the_runtime_is_found_from_the_launch_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A runtime under HOME (a version manager, a bin/ prefix, a script's node_modules) is readable; HOME is not."""
    from coffer.upstreams import runtimes

    home = tmp_path / "home"
    node = home / ".nvm" / "versions" / "node" / "v22" / "bin" / "node"
    tool = home / "apps" / "tool" / "bin" / "tool"
    script = home / "proj" / "node_modules" / "pkg" / "dist" / "index.js"
    for f in (node, tool, script):
        f.parent.mkdir(parents=True)
        f.write_text("#!/bin/sh\n")
    monkeypatch.setenv("HOME", str(home))
    assert runtimes.runtime_root(str(node)) == str(home / ".nvm")
    assert runtimes.runtime_root(str(tool)) == str(home / "apps" / "tool")
    assert runtimes.project_of(str(script)) == str(home / "proj")
    assert runtimes.runtime_root("/usr/bin/env") is None
    assert str(home) not in runtimes.program_dirs(str(tool), f"{home / 'bin'}:{home}")
    site = next(p for p in sys.path if p.endswith("site-packages"))  # where mcp is: a venv's, when in one
    found = runtimes.program_dirs(sys.executable, "/usr/bin")
    assert any(runtimes.within(os.path.realpath(site), d) for d in found), (site, found)


def test_a_denial_names_what_was_denied_and_the_grant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from coffer.upstreams import denials

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    start = _start(tmp_path, sandbox.Policy(), "landlock", monkeypatch)
    said = denials.hint(start, "fs", f"Error: EACCES: permission denied, open '{outside / 'a.txt'}'")
    assert said is not None and f"coffer edit fs --allow-read {outside / 'a.txt'}` (--allow-write" in said
    said = denials.hint(start, "fs", f"ENOENT: no such file or directory, scandir '{outside}'")
    assert said is not None and f"--allow-read {outside}" in said
    said = denials.hint(start, "db", "connect EACCES 127.0.0.1:5432")
    assert said is not None and "coffer edit db --allow-host localhost:5432" in said
    assert denials.hint(start, "fs", "ENOENT: no such file or directory, open '/nonexistent/dir/x'") is None
    assert denials.hint(start, "fs", "TypeError: x is not a function") is None


def test_a_drawn_traceback_on_stderr_proposes_no_grant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """rich draws a traceback in a box and wraps its paths ("/venv/lib/python3.11/s", "ite-packages/mcp",
    "/server.py:87"): a fragment is no file to grant (a fresh venv's CI run proposed `--allow-read
    /server.py`). A port named in the call's arguments still gets its hint; a real path on stderr still counts."""
    from coffer.upstreams import denials

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    start = _start(tmp_path, sandbox.Policy(), "landlock", monkeypatch)
    drawn = (
        "                             │ /work/venv/lib/python3.11/s │\n"
        "                             │ ite-packages/mcp/server/mcpserver │\n"
        "                             │ /server.py:87 in call_tool        │\n"
        "                             UnexpectedToolError: Error executing\n"
    )
    args = ['{"url": "http://localhost:41695/status"}']
    said = denials.hint(start, "hostile", "Error executing tool fetch", context=args, stderr=drawn)
    assert said is not None and "--allow-host localhost:41695" in said and "server.py" not in said
    gone = "OSError: [Errno 2] No such file or directory: '/server.py'\n"
    assert denials.hint(start, "hostile", "Error executing tool fetch", stderr=gone) is None
    real = f"PermissionError: [Errno 13] Permission denied: '{outside / 'data'}'\n"
    (outside / "data").write_text("x")
    said = denials.hint(start, "hostile", "Error executing tool read", stderr=real)
    assert said is not None and f"--allow-read {outside / 'data'}" in said


def test_registry_data_only_narrows_a_policy() -> None:
    """A publisher's `_meta` that asks for files, ports or the host network gets only its host list, which
    is narrower than the default: registry data never widens what a server may do."""
    from coffer.discovery import entries, launch

    permissions = {
        "network": {"outbound": {"allow_host": ["api.example.com"], "allow_port": [22, 5432], "insecure": True}},
        "read": ["~/.ssh", "/"],
        "write": ["~"],
        "filesystem": {"read": ["~"], "write": ["~"]},
    }
    server = {
        "name": "io.example/hungry",
        "version": "1.0.0",
        "packages": [{"registryType": "npm", "identifier": "hungry-mcp", "version": "1.0.0"}],
        "_meta": {entries.PUBLISHER_META: {"permissions": permissions, "sandbox": "off", "ports": [22]}},
    }
    plan = launch.plan(entries.parse_item({"server": server}, "https://registry.example"))
    assert plan.hosts == ["api.example.com", "registry.npmjs.org"]
    policy = sandbox.policy_for(cfg("npx", "-y", "hungry-mcp@1.0.0", sandbox={"network": plan.hosts}))
    assert policy.network == ("api.example.com", "registry.npmjs.org") and not policy.off
    assert not policy.read and not policy.write and not policy.ports and not policy.named


@pytest.mark.parametrize("mechanism", ["bubblewrap", "landlock"])
def test_a_server_gets_its_own_home_cwd_and_caches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mechanism: str
) -> None:
    """Its working directory is its own home where its entry sets none (a server that writes state into its
    cwd keeps working), and the user's XDG dirs (a cache outside HOME) never point it at the user's."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    found = sandbox.Support("/usr/bin/bwrap" if mechanism == "bubblewrap" else None, 7, True)
    monkeypatch.setattr(sandbox, "support", lambda: found)
    ca = tmp_path / "corp" / "ca.pem"  # a company's CA where the user keeps it: read, as TLS needs it
    ca.parent.mkdir()
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    env = {
        "PATH": "/usr/bin",
        "XDG_CACHE_HOME": "/srv/cache",
        "XDG_RUNTIME_DIR": "/run/user/0",
        "SSL_CERT_FILE": str(ca),
    }
    start = sandbox.prepare(cfg(sys.executable, "-c", "pass"), sandbox.Policy(), sys.executable, env)
    assert start.visible(str(ca)) and not start.writable(str(ca)) and not start.visible(str(ca.parent / "other"))
    assert start.cwd == start.home and start.writable(start.home) and start.writable(start.tmp)
    assert "XDG_CACHE_HOME" not in start.env and "XDG_RUNTIME_DIR" not in start.env
    assert start.env["TMPDIR"] == start.tmp and os.stat(start.home).st_mode & 0o777 == 0o700
    own = sandbox.prepare(
        cfg(sys.executable, "-c", "pass", env={"XDG_CACHE_HOME": "/srv/c"}),
        sandbox.Policy(),
        sys.executable,
        {"XDG_CACHE_HOME": "/srv/c"},
    )
    assert own.env["XDG_CACHE_HOME"] == "/srv/c", "what its entry sets, it keeps"
    if mechanism == "bubblewrap":
        line = start.confine(["/bin/true"])
        assert ["--bind", start.home, str(tmp_path / "home")] == line[
            line.index(start.home) - 1 : line.index(start.home) + 2
        ]
        assert "--chdir" in line and line[line.index("--chdir") + 1] == str(tmp_path / "home")
    else:
        assert start.env["HOME"] == start.home


@pytest.mark.parametrize("mechanism", ["bubblewrap", "landlock"])
def test_a_denial_behind_a_wall_is_said_to_be_on_purpose_never_a_grant(
    tmp_path: Path, coffer_home: Path, monkeypatch: pytest.MonkeyPatch, mechanism: str
) -> None:
    """A server granted ~ that fails on ~/.ssh/id_rsa or the vault's registry is told that Coffer hides it
    on purpose and why, in words an agent may pass on: never the `coffer edit` that would open it."""
    from coffer.upstreams import denials

    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("key\n")
    (coffer_home / "coffer.toml").parent.mkdir(parents=True, exist_ok=True)
    (coffer_home / "coffer.toml").write_text("")
    monkeypatch.setenv("HOME", str(home))
    start = _start(tmp_path, sandbox.Policy(write=(str(tmp_path),)), mechanism, monkeypatch)
    key = denials.hint(start, "homefs", f"Error: ENOENT: no such file or directory, open '{home / '.ssh' / 'id_rsa'}'")
    assert key is not None and "secret place (SSH keys)" in key and "on purpose" in key, key
    vault = denials.hint(start, "homefs", f"EACCES: permission denied, open '{coffer_home / 'coffer.toml'}'")
    assert vault is not None and "Coffer's vault" in vault and "whatever it is granted" in vault, vault
    for said in (key, vault):
        assert "coffer edit" not in said and "--allow" not in said
    ordinary = denials.hint(start, "homefs", f"EROFS: read-only file system, open '{tmp_path / 'elsewhere' / 'x'}'")
    assert ordinary is None, "a path the grant holds is not a denial"


@pytest.mark.parametrize("mechanism", ["bubblewrap", "landlock"])
def test_a_hint_comes_from_what_was_denied_not_from_error_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mechanism: str
) -> None:
    """Real servers' failures, as they word them: a path with no error word, a lock that could not be taken
    in a read-only grant, a refused local port named only in the call's arguments, and a file the server's
    own home lacks that the user's has (a secret place among them is said to be hidden on purpose)."""
    from coffer.upstreams import denials

    home, repo, outside = tmp_path / "home", tmp_path / "repo", tmp_path / "outside"
    for folder in (home / ".kube", repo / ".git", outside):
        folder.mkdir(parents=True)
    (home / ".gitconfig").write_text("[user]\n")
    (home / ".kube" / "config").write_text("clusters: []\n")
    monkeypatch.setenv("HOME", str(home))
    start = _start(tmp_path, sandbox.Policy(read=(str(repo),)), mechanism, monkeypatch)
    said = denials.hint(start, "git", f"Error executing tool git_log: {outside}")
    assert said is not None and f"coffer edit git --allow-read {outside}" in said, said
    said = denials.hint(start, "git", f"Lock at '{repo}/.git/index.lock' could not be obtained")
    assert said is not None and f"--allow-write {repo}/.git/index.lock" in said, said
    said = denials.hint(
        start, "fetch", "ConnectError('All connection attempts failed')", context=['{"url": "http://localhost:8080/x"}']
    )
    assert said is not None and "coffer edit fetch --allow-host localhost:8080" in said, said
    assert denials.hint(start, "fetch", "ConnectError('x')", context=['{"url": "https://example.com"}']) is None
    in_its_home = Path(start.home_at if mechanism == "bubblewrap" else start.home)
    said = denials.hint(start, "git", f"fatal: unable to read config file '{in_its_home / '.gitconfig'}'")
    assert said is not None and "--allow-read ~/.gitconfig" in said, said
    said = denials.hint(start, "k8s", f"ENOENT: no such file or directory, open '{in_its_home / '.kube' / 'config'}'")
    assert said is not None and "secret place" in said and "--allow" not in said, said
    assert denials.hint(start, "git", f"fatal: bad revision in {repo}") is None, "a readable path is no denial"


def test_every_agent_config_coffer_knows_is_a_secret_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The configs `coffer import` reads hold every server's tokens: each is a secret place, so no grant of ~
    opens one (a client added to coffer.clients.known without one here fails this test)."""
    from coffer.clients.known import CLIENTS
    from coffer.upstreams import walls

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    from coffer.errors import UsageError

    for client in CLIENTS.values():
        try:
            path = client.default_path()
        except UsageError:  # no usual file (a project's own): nothing under HOME to hide
            continue
        place = walls.secret_of(str(path))
        assert place is not None, f"{client.name}: {path} is in no secret place"

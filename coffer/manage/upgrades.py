"""`coffer outdated` and `coffer upgrade`: registry servers with a newer version, and moving a pin.

`upgrade` only moves the pin: a changed launch is held for approval with its diff, as any edit of
coffer.toml is, and a new version that needs what the entry does not give is refused with the way on.
"""

from __future__ import annotations

from coffer.discovery import cache
from coffer.discovery.entries import DiscoveryError, Entry
from coffer.discovery.launch import plan
from coffer.errors import ConflictError, NotFoundError, UsageError
from coffer.manage.discover import refresh, registry_urls
from coffer.vault import registry
from coffer.vault.servers import inline


def outdated(url: str | None = None, offline: bool = False) -> tuple[list[dict[str, str]], list[str]]:
    """Installed registry servers whose registry has a newer version than their pin."""
    urls = registry_urls(url)
    notes = [] if offline else refresh(urls)
    out = []
    for cfg in registry.load().servers.values():
        src = cfg.source
        if src is None or src["registry"] not in urls:
            continue
        latest = cache.entry(src["registry"], src["name"])
        if latest is not None and latest.version != src["version"]:
            out.append({"server": cfg.name, "name": src["name"], "installed": src["version"], "latest": latest.version})
    return out, notes


def upgrade(server: str, offline: bool = False) -> dict[str, str]:
    """Move SERVER's pin to its registry's latest version. Written as an edit of coffer.toml, not
    approved: the gateway holds the changed launch until `coffer approve SERVER` (`coffer diff` shows it)."""
    cfg = registry.load().get(server)
    src = cfg.source
    if src is None:
        raise UsageError(f"'{server}' was not installed from a registry (`coffer edit` changes its launch line)")
    if not offline:
        refresh([src["registry"]])
    latest = cache.entry(src["registry"], src["name"])
    if latest is None:
        raise NotFoundError(f"{src['name']} is no longer in {src['registry']}")
    if latest.version == src["version"]:
        raise ConflictError(f"'{server}' already runs {src['name']} {latest.version}, the latest")
    needs = _new_needs(cfg, latest)
    if needs:
        raise DiscoveryError(
            f"{src['name']} {latest.version} needs what '{server}' does not give it: {', '.join(needs)}; "
            f"`coffer remove {server}` and `coffer add {src['name']}` with them"
        )
    old_args, new_args = list(cfg.args), _repin(cfg, latest)
    url = _repin_url(cfg, latest)
    if new_args == old_args and url == cfg.url:
        raise DiscoveryError(
            f"'{server}': its launch line does not hold the pin {src['version']} Coffer wrote; "
            f"remove it and `coffer add {src['name']}` again"
        )
    with registry.edit() as doc:
        table = doc["servers"][server]
        if cfg.url:
            table["url"] = url
        else:
            table["args"] = new_args
        table["source"] = inline({**src, "version": latest.version})
    return {"server": server, "name": src["name"], "from": src["version"], "to": latest.version}


def _new_needs(cfg: registry.ServerConfig, latest: Entry) -> list[str]:
    """Required environment variables and headers of the latest version's plan (the one the server
    runs as) that the vault's entry does not set: moving the pin alone would start it without them."""
    try:
        how = plan(latest, via="remote" if cfg.url else None)
    except DiscoveryError as exc:  # the new version has nothing Coffer can run
        return [str(exc)]
    given = set(cfg.env) | set(cfg.headers)
    wanted = {**how.env, **how.headers}
    return sorted(
        name
        for name, template in wanted.items()
        if name not in given
        and any(i.required and i.default is None and "{" + i.name + "}" in template for i in how.inputs.values())
    )


def _repin(cfg: registry.ServerConfig, latest: Entry) -> list[str]:
    """The args with each package's pin moved to `latest`'s: `pkg@1.0`, `pkg==1.0`, `image:1.0`."""
    versions: dict[str, str] = {}
    for p in latest.packages:
        ident, version = str(p["identifier"]), str(p.get("version") or latest.version)
        tail = ident.rsplit("/", 1)[-1]
        if p.get("registryType") == "oci" and ":" in tail:
            ident, version = ident.rsplit(":", 1)
        versions[ident] = version
    out = []
    for arg in cfg.args:
        for sep in ("==", "@", ":"):
            base, found, _ = arg.rpartition(sep)
            if found and base in versions:
                arg = f"{base}{sep}{versions[base]}"
                break
        out.append(arg)
    return out


def _repin_url(cfg: registry.ServerConfig, latest: Entry) -> str | None:
    if not cfg.url:
        return cfg.url
    urls = [str(r["url"]) for r in latest.remotes]
    return cfg.url if cfg.url in urls or not urls else urls[0]

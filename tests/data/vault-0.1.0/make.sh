#!/usr/bin/env bash
# Re-records this folder: a vault written by Coffer 0.1.0 (commit e7ea8b0), for tests/vault/test_upgrade.py.
# Run from anywhere in a checkout of Coffer with its dependencies installed: bash tests/data/vault-0.1.0/make.sh
# It runs 0.1.0's own code (git archive of e7ea8b0, on PYTHONPATH), never this checkout's.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(mktemp -d)
out=/tmp/coffer-vault-0.1.0   # a fixed place: the launch lines recorded in coffer.toml name it
trap 'rm -rf "$src" "$out"' EXIT
git -C "$here/../../.." archive e7ea8b0 | tar -x -C "$src"
rm -rf "$out" && mkdir -p "$out/vault" "$out/bin"
cp "$src/coffer/examples/demo_server.py" "$out/bin/demo_server.py"
demo="$out/bin/demo_server.py"
export PYTHONPATH="$src" COFFER_HOME="$out/vault" COFFER_SECRETS_BACKEND=file COFFER_STANDALONE=1
export COFFER_REGISTRY_REFRESH=off
coffer() { (cd "$out/vault" && python -m coffer "$@"); }
coffer --version | grep -qx "coffer 0.1.0"
# the secrets first: `add` resolves ${secret:...} when it starts a server to list its tools
printf %s 'tok-0.1.0-secret' | coffer secret set api_token
printf %s 'second-value' | coffer secret set other.key
coffer add demo -- python "$demo"
coffer add notes --prefix nb --env "TOKEN=\${secret:api_token}" --timeout 30 -- python "$demo"
coffer add remote --url http://127.0.0.1:9/mcp --header "Authorization=Bearer \${secret:other.key}" --no-probe
coffer add idle --disabled --no-probe -- python "$demo"
coffer disable demo__add
coffer profile add ci --server demo --pin demo__echo --max-tools 8
coffer profile add search-only --mode search
coffer memory add "Deploys go out on Tuesdays; the runbook is in the wiki." --tag ops
# log rows: 0.1.0's `coffer call` logs nothing, so an MCP client drives `coffer serve`, as an agent would
(cd "$out/vault" && python - <<'PY'
import os, sys, anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp_types import Implementation

async def main() -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "coffer", "serve"], env=dict(os.environ))
    me = Implementation(name="upgrade-maker", version="0.1")
    async with stdio_client(params) as (r, w), ClientSession(r, w, client_info=me) as s:
        await s.initialize()
        for tool, args in [("demo__echo", {"text": "one"}), ("demo__current_time", {"timezone": "UTC"}),
                           ("nb__echo", {"text": "two"}), ("coffer__search_tools", {"query": "echo text"}),
                           ("demo__add", {"a": 1, "b": 2})]:  # disabled: refused, and logged so
            await s.call_tool(tool, args)

anyio.run(main)
PY
)
# what 0.1.0 itself reads back: the test expects all of it from the upgraded vault
(cd "$out/vault" && python - > "$out/expected.json" <<'PY'
import json, sqlite3
from coffer.vault import registry, catalogue
from coffer.trust import secrets
reg = registry.load()
db = sqlite3.connect("coffer.db")
db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
snap = catalogue.load_snapshot()
print(json.dumps({
    "servers": {n: {"enabled": c.enabled, "command": c.command, "url": c.url, "disabled_tools": sorted(c.disabled_tools)}
                for n, c in reg.servers.items()},
    "profiles": sorted(reg.profiles),
    "secrets": {s.name: secrets.resolve(s.name) for s in secrets.list_secrets()},
    "snapshot": {n: sorted(t["name"] for t in e.tools) for n, e in snap.servers.items()},
    "rows": {t: [list(r) for r in db.execute(f"SELECT * FROM {t} ORDER BY rowid")] for t in sorted(tables)},
}, indent=1, sort_keys=True))
PY
)
test ! -e "$out/vault/coffer.db-wal" || test ! -s "$out/vault/coffer.db-wal"
for f in coffer.toml secrets.json catalogue.json coffer.db; do cp "$out/vault/$f" "$here/$f"; done
cp "$out/expected.json" "$here/expected.json"
echo "recorded in $here"

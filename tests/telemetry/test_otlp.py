"""OpenTelemetry export: with OTEL_EXPORTER_OTLP_ENDPOINT set, `coffer serve` (through its engine) sends
spans and call metrics over OTLP/HTTP (protobuf) to a real receiver on 127.0.0.1, continuing the host's
`traceparent` and passing its own to the upstream; arguments and results never appear. Unset, nothing
of the OpenTelemetry SDK is imported.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from coffer.engine import control
from tests.fixtures.gateway_harness import serve, text, wait_for
from tests.fixtures.raw_peer import register_protocol_server

pytestmark = pytest.mark.anyio
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
HOST_SPAN = "00f067aa0ba902b7"
CANARY = "canary-argument-5d1e"


class Receiver:
    """An OTLP/HTTP receiver: keeps every body POSTed to /v1/traces and /v1/metrics."""

    def __init__(self) -> None:
        self.bodies: dict[str, list[bytes]] = {"/v1/traces": [], "/v1/metrics": []}
        received = self.bodies

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                received.setdefault(self.path, []).append(body)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def spans(self) -> list[Any]:
        out = []
        for body in self.bodies["/v1/traces"]:
            request = ExportTraceServiceRequest.FromString(body)
            out += [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
        return out

    def metric_names(self) -> set[str]:
        names: set[str] = set()
        for body in self.bodies["/v1/metrics"]:
            request = ExportMetricsServiceRequest.FromString(body)
            names |= {m.name for rm in request.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
        return names


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    found = Receiver()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", found.url)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
    monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "300")
    yield found
    found.server.shutdown()


def attrs(span: Any) -> dict[str, Any]:
    return {
        a.key: a.value.WhichOneof("value") and getattr(a.value, a.value.WhichOneof("value")) for a in span.attributes
    }


async def test_a_call_is_exported_as_a_span_and_metrics_without_its_content(
    coffer_home: Path, receiver: Receiver
) -> None:
    await register_protocol_server(coffer_home, prefix=None)
    traceparent = f"00-{TRACE_ID}-{HOST_SPAN}-01"
    async with serve(coffer_home) as s:
        result = await s.call("proto__whoami", {"note": CANARY}, meta={"traceparent": traceparent})
        upstream_meta = json.loads(text(result))["meta"]
    control.stop(coffer_home / "coffer.toml")  # the engine flushes what it batched as it stops

    def call_span() -> Any:
        return next((sp for sp in receiver.spans() if attrs(sp).get("coffer.tool") == "whoami"), None)

    await wait_for(lambda: call_span() is not None, timeout=20, what="the call's span at the receiver")
    span = call_span()
    got = attrs(span)
    assert got["coffer.server"] == "proto" and got["coffer.outcome"] == "ok" and got["coffer.duration_ms"] > 0
    assert got["coffer.session"] and got["gen_ai.tool.name"] == "proto__whoami"
    assert span.trace_id.hex() == TRACE_ID and span.parent_span_id.hex() == HOST_SPAN  # the host's trace, continued
    sent = upstream_meta["traceparent"]  # the upstream got the gateway's own context, in the same trace
    assert sent.split("-")[1] == TRACE_ID and sent.split("-")[2] != HOST_SPAN
    client_ids = {sp.span_id.hex() for sp in receiver.spans() if sp.kind == sp.SPAN_KIND_CLIENT}
    assert sent.split("-")[2] in client_ids
    await wait_for(lambda: "coffer.calls" in receiver.metric_names(), timeout=20, what="the call metrics")
    assert "coffer.call.duration" in receiver.metric_names()
    everything = b"".join(b for bodies in receiver.bodies.values() for b in bodies)
    assert CANARY.encode() not in everything  # never arguments (nor results, which echo them)


def test_unset_means_no_opentelemetry_sdk_is_imported(coffer_home: Path) -> None:
    code = (
        "import sys, coffer.gateway.server, coffer.engine.daemon, coffer.cli.commands;"
        "print(sorted(m for m in sys.modules if m.startswith(('opentelemetry.sdk', 'opentelemetry.exporter'))))"
    )
    env = {"PATH": "/usr/bin:/bin", "COFFER_HOME": str(coffer_home)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "[]"
    from coffer.telemetry import otlp

    assert not otlp.wanted({}) and not otlp.wanted(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_SDK_DISABLED": "true"}
    )
    assert otlp.wanted({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://x/v1/traces"})

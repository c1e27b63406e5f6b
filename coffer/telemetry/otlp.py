"""OpenTelemetry set-up (provider, OTLP exporters) and Coffer's attributes and metrics on each call.

Nothing of OpenTelemetry is imported until `start` runs (telemetry on); the SDK packages are an extra
(`pip install '.[otel]'` from a checkout): asked for and missing, telemetry stays off with one warning.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("coffer.telemetry")

ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
PROTOCOL_VARS = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")


def wanted(env: dict[str, str] | None = None) -> bool:
    env = dict(os.environ) if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(env.get(v, "").strip() for v in ENDPOINT_VARS)


def protocol() -> str:
    """The OTLP protocol asked for; http/protobuf unless another one this install can speak is named."""
    asked = next((os.environ[v].strip() for v in PROTOCOL_VARS if os.environ.get(v, "").strip()), "http/protobuf")
    if asked == "grpc":
        import importlib.util

        try:
            found = importlib.util.find_spec("opentelemetry.exporter.otlp.proto.grpc") is not None
        except ImportError:
            found = False
        if not found:
            log.warning("OTLP protocol grpc asked for, but its exporter is not installed: using http/protobuf")
            return "http/protobuf"
        return "grpc"
    if asked != "http/protobuf":
        log.warning("OTLP protocol %s is not supported by the Python exporter: using http/protobuf", asked)
    return "http/protobuf"


@dataclass
class Telemetry:
    """The providers Coffer installed, and the instruments it records each call with."""

    tracer_provider: Any
    meter_provider: Any
    calls: Any  # counter: coffer.calls
    duration: Any  # histogram: coffer.call.duration (ms)

    def record(
        self,
        server: str,
        tool: str,
        outcome: str,
        ms: float,
        client: str | None,
        session: str,
        member: str | None = None,
    ) -> None:
        """Coffer's attributes on the current (SDK-made) SERVER span, and the call metrics; a team
        gateway's member as `enduser.id` (OpenTelemetry's semantic convention), on the span only."""
        from opentelemetry import trace

        attributes = {"coffer.server": server, "coffer.tool": tool, "coffer.outcome": outcome}
        span = trace.get_current_span()
        if span.is_recording():
            span.set_attributes(
                attributes | {"coffer.duration_ms": ms, "coffer.session": session, "coffer.client": client or "unknown"}
            )
            if member is not None:
                span.set_attribute("enduser.id", member)
        self.calls.add(1, attributes)
        self.duration.record(ms, attributes)

    def shutdown(self) -> None:
        """Export what is batched (bounded by the exporters' own timeouts)."""
        for provider in (self.tracer_provider, self.meter_provider):
            try:
                provider.shutdown()
            except Exception as exc:  # an unreachable collector must not stop the gateway's exit
                log.warning("telemetry did not flush: %s", type(exc).__name__)


def start(service: str = "coffer") -> Telemetry | None:
    """Install the tracer and meter providers with OTLP exporters; None when the SDK is not installed."""
    try:
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        log.warning("OTEL_EXPORTER_OTLP_ENDPOINT is set but opentelemetry-sdk is not installed: no telemetry")
        return None
    import importlib

    kind = "grpc" if protocol() == "grpc" else "http"
    try:
        spans = importlib.import_module(f"opentelemetry.exporter.otlp.proto.{kind}.trace_exporter")
        points = importlib.import_module(f"opentelemetry.exporter.otlp.proto.{kind}.metric_exporter")
    except ImportError:
        log.warning("the OTLP exporter is not installed (`pip install '.[otel]'` from a checkout): no telemetry")
        return None
    from coffer import __version__

    resource = Resource.create({"service.name": service, "service.version": __version__})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(spans.OTLPSpanExporter()))  # a call waits for nothing
    trace.set_tracer_provider(tracer_provider)
    meter_provider = MeterProvider(
        resource=resource, metric_readers=[PeriodicExportingMetricReader(points.OTLPMetricExporter())]
    )
    metrics.set_meter_provider(meter_provider)
    meter = meter_provider.get_meter("coffer", __version__)
    calls = meter.create_counter("coffer.calls", unit="{call}", description="Tool calls through the gateway")
    duration = meter.create_histogram("coffer.call.duration", unit="ms", description="Tool call duration")
    return Telemetry(tracer_provider, meter_provider, calls, duration)

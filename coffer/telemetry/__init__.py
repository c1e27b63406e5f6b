"""Telemetry: traces and call metrics exported over OTLP when the standard OpenTelemetry variables ask for
it, into the observability stack a team already runs.

Modules:

    otlp        the providers and exporters, and Coffer's attributes and metrics on each call

`start()` is all the gateway calls: when neither `OTEL_EXPORTER_OTLP_ENDPOINT` nor
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set (or `OTEL_SDK_DISABLED=true`) it returns None and nothing of
the OpenTelemetry SDK is imported. Otherwise it installs a tracer provider with a batching OTLP exporter
(http/protobuf, the specification's default) and a meter provider. The MCP SDK makes the spans (one
SERVER span per request, continuing the host's `traceparent` from `_meta`, and a CLIENT span per
upstream request that injects its own): Coffer adds its attributes under the log's rule (server, tool,
outcome, duration, session; never arguments or results). Imports only the errors part.
"""

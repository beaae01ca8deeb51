// Package telemetry sets up Baton's OpenTelemetry tracing and carries W3C trace context
// across its three protocols.
//
// Tracing is off unless an OTLP endpoint is configured (telemetry.otlp_endpoint or the
// standard OTEL_EXPORTER_OTLP_ENDPOINT variables): then no exporter is built, no
// connection is opened and every tracer is a no-op. The W3C propagator is set either way,
// so an incoming traceparent still reaches the sub-agents and MCP servers unchanged.
//
// The package holds the pieces the protocol packages take through their options
// ([Transport] for HTTP clients, [MCPMiddleware] for MCP requests), so that they never
// depend on the engine, and the log handler that puts trace ids on log lines.
// Span names and attributes follow the semantic conventions recorded in
// design/telemetry.md.
package telemetry

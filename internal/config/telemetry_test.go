package config

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoadTelemetry(t *testing.T) {
	c, err := loadYAML(t, "telemetry:\n  otlp_endpoint: http://127.0.0.1:4318\n  otlp_protocol: http/json\n  service_name: baton-eu\n", env{})
	require.NoError(t, err)
	assert.Equal(t, Telemetry{OTLPEndpoint: "http://127.0.0.1:4318", OTLPProtocol: "http/json", ServiceName: "baton-eu"}, c.Telemetry)

	c, err = loadYAML(t, "listen: 127.0.0.1:8080\n", env{})
	require.NoError(t, err)
	assert.Equal(t, Telemetry{OTLPProtocol: "http/protobuf", ServiceName: "baton"}, c.Telemetry, "defaults: tracing off")
}

func TestLoadTelemetryErrors(t *testing.T) {
	tests := []struct{ name, yaml, key string }{
		{"protocol", "telemetry:\n  otlp_protocol: thrift\n", "telemetry.otlp_protocol"},
		{"endpoint scheme", "telemetry:\n  otlp_endpoint: ftp://collector:4318\n", "telemetry.otlp_endpoint"},
		{"endpoint host", "telemetry:\n  otlp_endpoint: http://\n", "telemetry.otlp_endpoint"},
		{"service name", "telemetry:\n  service_name: \" \"\n", "telemetry.service_name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadYAML(t, tt.yaml, env{})
			require.ErrorIs(t, err, ErrInvalid)
			var fe *FieldError
			require.True(t, errors.As(err, &fe))
			assert.Equal(t, tt.key, fe.Key)
			assert.Equal(t, "baton.yaml", fe.Where)
		})
	}
}

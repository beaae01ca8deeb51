package main

import (
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMCPDemoCommandArgs(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no mode", nil, "usage"},
		{"unknown mode", []string{"grpc"}, `unknown mode "grpc"`},
		{"stdio takes no args", []string{"stdio", "x"}, "stdio takes no arguments"},
		{"bad flag", []string{"http", "--port", "1"}, "flag provided but not defined"},
		{"bad address", []string{"http", "--listen", "nope"}, "nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(tt.args, io.Discard)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

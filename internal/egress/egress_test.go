package egress

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAllows(t *testing.T) {
	t.Parallel()
	tests := []struct {
		ip             string
		public, privat bool
	}{
		{"93.184.216.34", true, true},
		{"2606:4700::1111", true, true},
		{"127.0.0.1", false, true},
		{"::1", false, true},
		{"10.1.2.3", false, true},
		{"192.168.0.10", false, true},
		{"172.20.0.1", false, true},
		{"fd00:ec2::254", false, true},
		{"::ffff:10.0.0.1", false, true},
		{"169.254.169.254", false, false}, // cloud metadata
		{"fe80::1", false, false},
		{"0.0.0.0", false, false},
		{"::", false, false},
		{"224.0.0.1", false, false},
		{"::ffff:169.254.169.254", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.ip, func(t *testing.T) {
			ip := netip.MustParseAddr(tt.ip)
			assert.Equal(t, tt.public, Policy{}.Allows(ip), "public only")
			assert.Equal(t, tt.privat, Policy{AllowPrivate: true}.Allows(ip), "private allowed")
		})
	}
}

// A real dial through the guard: a loopback server is refused without AllowPrivate and
// reached with it; the refusal wraps ErrForbidden.
func TestControlOnRealDial(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer srv.Close()
	get := func(p Policy) error {
		d := &net.Dialer{Control: Control(p)}
		tr := &http.Transport{DialContext: d.DialContext}
		defer tr.CloseIdleConnections()
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL, nil)
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	err := get(Policy{})
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrForbidden), "%v", err)
	assert.NoError(t, get(Policy{AllowPrivate: true}))
}

func TestIsPrivateHost(t *testing.T) {
	t.Parallel()
	for u, want := range map[string]bool{
		"http://127.0.0.1:8080/mcp": true,
		"http://localhost:3000/mcp": true,
		"https://10.0.0.5/mcp":      true,
		"http://[::1]:9/mcp":        true,
		"https://mcp.example.com/x": false,
		"https://93.184.216.34/mcp": false,
		"https://169.254.169.254/":  false,
		"::not a url":               false,
	} {
		assert.Equal(t, want, IsPrivateHost(u), u)
	}
}

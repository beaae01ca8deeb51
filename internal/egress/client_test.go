package egress

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// counting is a local server that counts the requests reaching it.
func counting(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if h != nil {
			h(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// publicHost resolves the made-up name public.test to addr without the guard, as a real
// resolver would resolve a public peer's name to a public address; every other dial is
// guarded.
func publicHost(addr string) func(DialFunc) DialFunc {
	return func(guarded DialFunc) DialFunc {
		return func(ctx context.Context, network, address string) (net.Conn, error) {
			if address == "public.test:80" {
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			}
			return guarded(ctx, network, address)
		}
	}
}

func TestClientPublicPeerReachesNoPrivateAddress(t *testing.T) {
	t.Parallel()
	internal, hits := counting(t, nil)
	c := NewClient(ForPeer("https://mcp.example.com/mcp"), ClientOptions{})
	_, err := c.Get(internal.URL)
	require.ErrorIs(t, err, ErrForbidden)
	assert.Zero(t, hits.Load())

	// A private peer's client may reach it.
	c = NewClient(ForPeer("http://10.0.0.5:8080/mcp"), ClientOptions{})
	resp, err := c.Get(internal.URL)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, int32(1), hits.Load())
}

func TestClientRedirectsAreCheckedOnEveryHop(t *testing.T) {
	t.Parallel()
	internal, hits := counting(t, nil)
	port := strconv.Itoa(internal.Listener.Addr().(*net.TCPAddr).Port)
	tests := map[string]string{
		"ip literal":    internal.URL + "/latest/meta-data",
		"localhost":     "http://localhost:" + port + "/",
		"resolves here": "http://internal.test:" + port + "/",
		"metadata":      "http://169.254.169.254/latest/meta-data",
	}
	for name, target := range tests {
		t.Run(name, func(t *testing.T) {
			public, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, target, http.StatusFound)
			})
			dial := func(guarded DialFunc) DialFunc {
				pub := publicHost(public.Listener.Addr().String())(guarded)
				return func(ctx context.Context, network, address string) (net.Conn, error) {
					if h, p, _ := net.SplitHostPort(address); h == "internal.test" {
						address = net.JoinHostPort("127.0.0.1", p) // what its DNS answers
					}
					return pub(ctx, network, address)
				}
			}
			c := NewClient(Policy{}, ClientOptions{Dial: dial})
			_, err := c.Get("http://public.test/.well-known/oauth-protected-resource")
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrForbidden)
		})
	}
	assert.Zero(t, hits.Load(), "a redirect reached an internal address")
}

func TestClientRefusesHTTPSDowngrade(t *testing.T) {
	t.Parallel()
	plain, hits := counting(t, nil)
	secure := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, plain.URL+"/token", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(secure.Close)
	// Both on loopback: a private peer's policy, so only the downgrade is refused.
	c := NewClient(Policy{AllowPrivate: true}, ClientOptions{})
	c.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: secure.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
	_, err := c.Get(secure.URL + "/.well-known/oauth-authorization-server")
	require.ErrorIs(t, err, ErrRedirect)
	assert.Zero(t, hits.Load())

	// Redirect chains are bounded.
	var loop *httptest.Server
	loop = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, loop.URL+"/again", http.StatusFound)
	}))
	t.Cleanup(loop.Close)
	_, err = c.Get(loop.URL)
	require.ErrorIs(t, err, ErrRedirect)
}

func TestForPeer(t *testing.T) {
	t.Parallel()
	assert.False(t, ForPeer("https://mcp.example.com/mcp", "").AllowPrivate)
	assert.True(t, ForPeer("https://agent.example.com", "http://localhost:1/card.json").AllowPrivate)
	assert.True(t, ForPeer("http://192.168.1.1/mcp").AllowPrivate)
}

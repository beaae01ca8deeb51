package subagent

import (
	"math/rand/v2"
	"strings"
	"testing"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseCardDefaults(t *testing.T) {
	t.Run("bare 0.3 card", func(t *testing.T) {
		card, err := parseCard([]byte(`{"name":"n","description":"d","version":"1","url":"http://a.example/rpc","capabilities":{}}`))
		require.NoError(t, err)
		require.Len(t, card.SupportedInterfaces, 1)
		iface := card.SupportedInterfaces[0]
		assert.Equal(t, "http://a.example/rpc", iface.URL)
		assert.Equal(t, sdk.TransportProtocolJSONRPC, iface.ProtocolBinding)
		assert.Equal(t, "0", majorVersion(string(iface.ProtocolVersion)))
	})
	t.Run("explicit fields are kept", func(t *testing.T) {
		card, err := parseCard([]byte(`{"name":"n","url":"http://a.example/rest","preferredTransport":"HTTP+JSON","protocolVersion":"0.2.5","capabilities":{}}`))
		require.NoError(t, err)
		require.Len(t, card.SupportedInterfaces, 1)
		assert.Equal(t, sdk.TransportProtocol("HTTP+JSON"), card.SupportedInterfaces[0].ProtocolBinding)
		assert.Equal(t, sdk.ProtocolVersion("0.2.5"), card.SupportedInterfaces[0].ProtocolVersion)
	})
	t.Run("1.0 card untouched", func(t *testing.T) {
		card, err := parseCard([]byte(`{"name":"n","supportedInterfaces":[{"url":"http://a.example/a2a","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"capabilities":{}}`))
		require.NoError(t, err)
		require.Len(t, card.SupportedInterfaces, 1)
		assert.Equal(t, "1", majorVersion(string(card.SupportedInterfaces[0].ProtocolVersion)))
	})
	for _, bad := range []string{``, `[]`, `"card"`, `{"name":`} {
		_, err := parseCard([]byte(bad))
		assert.Error(t, err, bad)
	}
}

func TestOrigins(t *testing.T) {
	set, err := newOriginSet("http://Agent.example", "https://cdn.example:8443/x", "")
	require.NoError(t, err)
	for u, want := range map[string]bool{
		"http://agent.example:80/a2a":        true,
		"http://AGENT.example/other":         true,
		"https://agent.example/a2a":          false, // another scheme is another origin
		"http://agent.example:8080/":         false,
		"https://cdn.example:8443/rpc":       true,
		"https://cdn.example/rpc":            false,
		"ftp://agent.example/":               false,
		"/relative":                          false,
		"http://evil.example@agent.example/": true, // userinfo is not the host
		"http://agent.example.evil.example/": false,
	} {
		assert.Equal(t, want, set.allows(u), u)
	}
	_, err = newOriginSet("not a url")
	assert.Error(t, err)
}

func TestRedactURL(t *testing.T) {
	assert.Equal(t, "http://user:xxxxx@h.example/p", redactURL("http://user:secret@h.example/p"))
	assert.Equal(t, "http://h.example/p", redactURL("http://h.example/p"))
	assert.NotContains(t, redactURL("http://u:secret@h.example/%zz"), "secret")
}

// The incremental renderer produces exactly what PartsText produces for all parts at once,
// however the parts are split into chunks.
func TestRendererMatchesPartsText(t *testing.T) {
	pool := []*sdk.Part{
		sdk.NewTextPart("alpha "), sdk.NewTextPart("beta\n"), sdk.NewTextPart(""),
		sdk.NewDataPart(map[string]any{"k": 1}), sdk.NewFileURLPart("https://x.example/f.png", "image/png"),
		sdk.NewTextPart("gamma"), nil,
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		parts := make([]*sdk.Part, rng.IntN(12))
		for i := range parts {
			parts[i] = pool[rng.IntN(len(pool))]
		}
		var b strings.Builder
		r := newRenderer()
		for i := 0; i < len(parts); {
			n := 1 + rng.IntN(3)
			r.add(parts[i:min(i+n, len(parts))], func(s string) { b.WriteString(s) })
			i += n
		}
		require.Equal(t, PartsText(parts), b.String())
	}
}

// The transcript reports appended text once, ignores an older (shorter) snapshot, reports
// only what a longer snapshot adds, and reports replaced content anew.
func TestTranscriptHashes(t *testing.T) {
	var got []string
	tr := newTranscript(func(s string) { got = append(got, s) })
	tr.add("a", "hello ")
	tr.add("a", "world")
	tr.set("a", "hello")              // older snapshot
	tr.set("a", "hello world!")       // extends
	tr.set("a", "HELLO WORLD! again") // replaced
	assert.Equal(t, []string{"hello ", "world", "!", "\nHELLO WORLD! again"}, got)
}

func TestCappedText(t *testing.T) {
	c := cappedText{max: 5}
	c.write("abc")
	c.write("déf") // "é" is two bytes: cut on a character boundary
	assert.Equal(t, "abcd", c.String())
	assert.Equal(t, int64(3), c.omitted)
	c.write("m") // fits the byte left, but would leave a gap: dropped
	assert.Equal(t, "abcd", c.String())
	assert.Equal(t, int64(4), c.omitted)
}

// TestPickInterface: 1.0 before 0.3, and among the 1.0 interfaces the card's order, over
// JSON-RPC or HTTP+JSON; bindings this client does not speak are passed over.
func TestPickInterface(t *testing.T) {
	iface := func(binding, version, url string) *sdk.AgentInterface {
		return &sdk.AgentInterface{URL: url, ProtocolBinding: sdk.TransportProtocol(binding), ProtocolVersion: sdk.ProtocolVersion(version)}
	}
	for _, tc := range []struct {
		name    string
		ifaces  []*sdk.AgentInterface
		force   string
		wantURL string
		wantVer string
		wantErr string
	}{
		{"HTTP+JSON only", []*sdk.AgentInterface{iface("HTTP+JSON", "1.0", "http://a/rest")}, "", "http://a/rest", Protocol10, ""},
		{"card order: REST first", []*sdk.AgentInterface{iface("GRPC", "1.0", "http://a/grpc"), iface("http+json", "1.0", "http://a/rest"), iface("JSONRPC", "1.0", "http://a/rpc")}, "", "http://a/rest", Protocol10, ""},
		{"card order: JSON-RPC first", []*sdk.AgentInterface{iface("JSONRPC", "1.0", "http://a/rpc"), iface("HTTP+JSON", "1.0", "http://a/rest")}, "", "http://a/rpc", Protocol10, ""},
		{"1.0 before 0.3", []*sdk.AgentInterface{iface("JSONRPC", "0.3", "http://a/v0"), iface("HTTP+JSON", "1.0", "http://a/rest")}, "", "http://a/rest", Protocol10, ""},
		{"0.3 forced", []*sdk.AgentInterface{iface("HTTP+JSON", "1.0", "http://a/rest"), iface("JSONRPC", "0.3", "http://a/v0")}, Protocol03, "http://a/v0", Protocol03, ""},
		{"0.3 REST is not spoken", []*sdk.AgentInterface{iface("HTTP+JSON", "0.3", "http://a/rest")}, "", "", "", "offered: [HTTP+JSON 0.3]"},
		{"gRPC only", []*sdk.AgentInterface{iface("GRPC", "1.0", "http://a/grpc")}, "", "", "", "no JSON-RPC 1.0, HTTP+JSON 1.0 or JSON-RPC 0.3 interface"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, version, err := pickInterface(&sdk.AgentCard{SupportedInterfaces: tc.ifaces}, tc.force)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.wantURL, got.URL)
			assert.Equal(t, tc.wantVer, version)
		})
	}
}

package subagent

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSSETransportOptionTimeout: a client with a Timeout keeps a2a-go's own transport, whose
// reading of the body honours it; one without gets the go-sse one. Told apart by the one
// place where they differ: an event of two 6 MiB lines, which only the go-sse one refuses.
func TestSSETransportOptionTimeout(t *testing.T) {
	t.Parallel()
	line := "data: " + strings.Repeat("x", 6<<20) + "\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, line+line+"\n")
	}))
	defer srv.Close()
	card := &sdk.AgentCard{Name: "x", Capabilities: sdk.AgentCapabilities{Streaming: true},
		SupportedInterfaces: []*sdk.AgentInterface{{URL: srv.URL, ProtocolBinding: sdk.TransportProtocolJSONRPC, ProtocolVersion: sdk.Version}}}
	for _, timeout := range []time.Duration{0, time.Hour} {
		hc := &http.Client{Transport: &http.Transport{}, Timeout: timeout}
		client, err := a2aclient.NewFromCard(t.Context(), card, a2aclient.WithDefaultsDisabled(), sseTransportOption(hc, false))
		require.NoError(t, err)
		var got error
		for _, err := range client.SendStreamingMessage(t.Context(), &sdk.SendMessageRequest{Message: sdk.NewMessage(sdk.MessageRoleUser, sdk.NewTextPart("go"))}) {
			if err != nil {
				got = err
			}
		}
		require.Error(t, got)
		assert.Equal(t, timeout == 0, errors.Is(got, bufio.ErrTooLong), "timeout %v: %v", timeout, got)
		hc.CloseIdleConnections()
	}
}

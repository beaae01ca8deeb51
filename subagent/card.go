package subagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
)

// wellKnownCardPath is where a card is read below the agent's base URL.
const wellKnownCardPath = "/.well-known/agent-card.json"

// maxCardBytes caps a card: it comes from a peer, and no real card is near this size.
const maxCardBytes = 1 << 20

// errStatus is a card request answered with a status other than 200.
type errStatus struct{ code int }

func (e *errStatus) Error() string { return fmt.Sprintf("the card request got HTTP %d", e.code) }

// errRedirect is a redirect to another origin, which is never followed.
var errRedirect = errors.New("redirect to another origin refused")

// cardURL is where cfg's card is read: AgentConfig.CardURL, or the well-known path below URL.
func cardURL(cfg *AgentConfig) (string, error) {
	if cfg.CardURL != "" {
		return cfg.CardURL, nil
	}
	u, err := url.JoinPath(cfg.URL, wellKnownCardPath)
	if err != nil {
		return "", fmt.Errorf("bad agent URL %s: %w", redactURL(cfg.URL), err)
	}
	return u, nil
}

// fetchCard reads cfg's card through hc, tolerating servers that answer differently with and without
// an A2A-Version header: @a2a-js/sdk answers a header-less request with a 0.3 card (or an
// error when it has no 0.3 interface) and the v1.0 card when asked for 1.0.
func fetchCard(ctx context.Context, hc *http.Client, cfg *AgentConfig) (*sdk.AgentCard, error) {
	// A card that takes longer than this is as good as unreachable: the call that waits
	// for it answers so instead of running into its own timeout.
	ctx, cancel := context.WithTimeout(ctx, cardTimeout)
	defer cancel()
	where, err := cardURL(cfg)
	if err != nil {
		return nil, err
	}
	card, err := getCard(ctx, hc, where, "")
	if err == nil && len(card.SupportedInterfaces) > 0 {
		if _, _, perr := pickInterface(card, cfg.Protocol); perr == nil {
			return card, nil
		}
		// A 0.3 card with no interface this client speaks (say only HTTP+JSON, which is
		// spoken in 1.0 only): the 1.0 card of the same agent may have one.
	}
	if err != nil && !retryCardWithVersion(err) {
		return nil, err
	}
	card2, err2 := getCard(ctx, hc, where, string(sdk.Version))
	if err2 != nil {
		if err != nil {
			return nil, err
		}
		return card, nil // a card without interfaces: pickInterface says so
	}
	return card2, nil
}

// getCard makes one card request through hc. The body is capped; the error never holds the body.
func getCard(ctx context.Context, hc *http.Client, where, version string) (*sdk.AgentCard, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, where, nil)
	if err != nil {
		return nil, fmt.Errorf("bad card URL %s", redactURL(where))
	}
	req.Header.Set("Accept", "application/json")
	if version != "" {
		req.Header.Set(sdk.SvcParamVersion, version)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("card request to %s failed: %w", redactURL(where), scrubURLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return nil, fmt.Errorf("%s: %w", redactURL(where), &errStatus{code: resp.StatusCode})
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxCardBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the card from %s: %w", redactURL(where), scrubURLError(err))
	}
	if len(body) > maxCardBytes {
		return nil, fmt.Errorf("the card at %s is larger than %d bytes", redactURL(where), maxCardBytes)
	}
	card, err := parseCard(body)
	if err != nil {
		return nil, fmt.Errorf("the card at %s is not valid: %w", redactURL(where), err)
	}
	return card, nil
}

// parseCard reads a 1.0 or 0.3 card. A 0.3 card that leaves out preferredTransport or
// protocolVersion gets the spec defaults (JSONRPC, 0.3), as @a2a-js/sdk applies them.
func parseCard(body []byte) (*sdk.AgentCard, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(body, &probe); err != nil {
		return nil, errors.New("not a JSON object")
	}
	_, hasV1 := probe["supportedInterfaces"]
	if _, hasURL := probe["url"]; hasURL && !hasV1 {
		changed := false
		if _, ok := probe["preferredTransport"]; !ok || string(probe["preferredTransport"]) == `""` || string(probe["preferredTransport"]) == "null" {
			probe["preferredTransport"] = json.RawMessage(`"JSONRPC"`)
			changed = true
		}
		if _, ok := probe["protocolVersion"]; !ok || string(probe["protocolVersion"]) == `""` || string(probe["protocolVersion"]) == "null" {
			probe["protocolVersion"] = json.RawMessage(`"0.3"`)
			changed = true
		}
		if changed {
			b, err := json.Marshal(probe)
			if err != nil {
				return nil, err
			}
			body = b
		}
	}
	card, err := a2av0.NewAgentCardParser()(body)
	if err != nil {
		return nil, errors.New("the JSON does not have the shape of an agent card")
	}
	return card, nil
}

// retryCardWithVersion reports whether a failed card fetch got an answer from the server
// (so that asking again with a version header can help), as opposed to a network failure.
func retryCardWithVersion(err error) bool {
	var status *errStatus
	if errors.As(err, &status) {
		return status.code < 500
	}
	return !isNetworkError(err) && !errors.Is(err, io.ErrUnexpectedEOF)
}

// origin is the scheme://host:port of a URL, with the default port made explicit.
func origin(u *url.URL) string {
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if port == "" {
		switch strings.ToLower(u.Scheme) {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return strings.ToLower(u.Scheme) + "://" + host + ":" + port
}

// originSet is a set of origins (see origin).
type originSet map[string]bool

// newOriginSet builds the set of the origins of the given URLs; empty strings are skipped.
func newOriginSet(urls ...string) (originSet, error) {
	s := originSet{}
	for _, raw := range urls {
		if raw == "" {
			continue
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("%s is not an absolute http(s) URL", redactURL(raw))
		}
		s[origin(u)] = true
	}
	return s, nil
}

func (s originSet) union(o originSet) originSet {
	out := originSet{}
	for k := range s {
		out[k] = true
	}
	for k := range o {
		out[k] = true
	}
	return out
}

// allows reports whether raw is an http(s) URL on one of the origins.
func (s originSet) allows(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return false
	}
	return s[origin(u)]
}

// filter splits a card's interfaces into those on allowed origins and the URLs of the
// others.
func (s originSet) filter(ifaces []*sdk.AgentInterface) (usable []*sdk.AgentInterface, refused []string) {
	for _, iface := range ifaces {
		if iface == nil {
			continue
		}
		if s.allows(iface.URL) {
			usable = append(usable, iface)
		} else {
			refused = append(refused, iface.URL)
		}
	}
	return usable, refused
}

// redactURL hides the password in a URL's userinfo; a string that does not parse is
// replaced as a whole (it may hold anything).
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	if u.User == nil {
		return raw
	}
	return u.Redacted()
}

func redactAll(urls []string) []string {
	out := make([]string, len(urls))
	for i, u := range urls {
		out[i] = redactURL(u)
	}
	return out
}

// scrubURLError replaces the URL in a *url.Error by its redacted form (net/http already
// hides passwords there; this also covers errors built elsewhere).
func scrubURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		cp := *ue
		cp.URL = redactURL(ue.URL)
		return &cp
	}
	return err
}

// NewHTTPTransport returns an HTTP transport suited to many long-lived A2A streams: net/http's
// defaults with smaller connection buffers (2 KiB read, 1 KiB write instead of 4 KiB each:
// an open stream holds them for its whole life, and reads of large bodies bypass them)
// and an idle pool of 256 connections per host (the default 2 re-dials under load).
func NewHTTPTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ReadBufferSize = 2 << 10
	t.WriteBufferSize = 1 << 10
	t.MaxIdleConnsPerHost = 256
	return t
}

// newHTTPClient returns the client all requests of one agent go through: a copy of base
// (so the caller's client is not modified) whose transport adds the configured headers
// on the configured origins only and records HTTP statuses for the retry logic, and
// which follows redirects only within the origin of the original request. Without base
// the agent gets a transport of its own (NewHTTPTransport); release closes its idle
// connections (nil: none).
func newHTTPClient(base *http.Client, headers map[string]string, home originSet, logger *slog.Logger) (hc *http.Client, release func()) {
	var rt http.RoundTripper
	if base == nil {
		rt = NewHTTPTransport()
		hc = &http.Client{}
		release = hc.CloseIdleConnections
	} else {
		cp := *base
		hc = &cp
		rt = cp.Transport
		if rt == nil {
			rt = http.DefaultTransport
		}
	}
	hdr := make(http.Header, len(headers))
	for k, v := range headers {
		hdr.Set(k, v)
	}
	hc.Transport = &recordingTransport{base: rt, headers: hdr, home: home}
	hc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		if origin(req.URL) != origin(via[0].URL) {
			logger.Warn("a2a redirect to another origin refused", "from", redactURL(via[len(via)-1].URL.String()), "to", redactURL(req.URL.String()))
			return errRedirect
		}
		return nil
	}
	return hc, release
}

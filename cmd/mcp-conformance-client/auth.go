package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/baton-dev/baton/signin"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The conformance suite's fixed client identity facts (see its client auth scenarios).
const (
	// conformanceCIMD is the Client ID Metadata Document URL the suite's authorization
	// server accepts as client_id.
	conformanceCIMD = "https://conformance-test.local/client-metadata.json"
	// conformanceRedirect is where the suite's authorization server sends the browser; nothing
	// needs to listen there: the client reads the Location header.
	conformanceRedirect = "http://localhost:3000/callback"
	// principal is the one user the conformance client signs in.
	principal = "conformance"
	// maxSignIns bounds the sign-in rounds of one run, whatever the server asks.
	maxSignIns = 5
)

// conformanceContext is MCP_CONFORMANCE_CONTEXT: credentials for the scenarios that need
// pre-registration or a service account.
type conformanceContext struct {
	Name             string `json:"name"`
	ClientID         string `json:"client_id"`
	ClientSecret     string `json:"client_secret"`
	PrivateKeyPEM    string `json:"private_key_pem"`
	SigningAlgorithm string `json:"signing_algorithm"`
	// Workload identity federation: the platform-issued JWT.
	ValidJWT string `json:"valid_jwt"`
	// Enterprise-managed authorization (cross-app access): the enterprise IdP.
	IdPClientID      string `json:"idp_client_id"`
	IdPClientSecret  string `json:"idp_client_secret"`
	IdPIDToken       string `json:"idp_id_token"`
	IdPTokenEndpoint string `json:"idp_token_endpoint"`
}

// serviceScenario reports whether a scenario signs in without a user: client credentials,
// workload identity, or enterprise-managed authorization.
func serviceScenario(s string) bool {
	for _, p := range []string{"auth/client-credentials", "auth/wif-", "auth/cross-app-access", "auth/enterprise-managed"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// runAuth drives an auth/* scenario: it connects through a signin.Handler (or the
// client_credentials service handler), plays the browser whenever a sign-in is needed, then
// lists and calls the tools.
func runAuth(ctx context.Context, serverURL, scenario, rawContext string, stdout io.Writer) error {
	var cc conformanceContext
	if rawContext != "" {
		if err := json.Unmarshal([]byte(rawContext), &cc); err != nil {
			return fmt.Errorf("MCP_CONFORMANCE_CONTEXT is not valid JSON: %w", err)
		}
	}
	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone(), Timeout: 20 * time.Second}
	defer hc.CloseIdleConnections()

	var handler auth.OAuthHandler
	mcpHTTP := hc // the MCP transport's client; DPoP wraps it
	store := signin.NewMemory()
	if serviceScenario(scenario) {
		sc := signin.ServiceConfig{
			Server: "conformance", ServerURL: serverURL, ClientID: cc.ClientID, ClientSecret: cc.ClientSecret,
			PrivateKeyPEM: cc.PrivateKeyPEM, SigningAlgorithm: cc.SigningAlgorithm, Assertion: cc.ValidJWT, HTTPClient: hc,
		}
		if cc.IdPTokenEndpoint != "" {
			sc.Enterprise = &signin.EnterpriseIDP{TokenURL: cc.IdPTokenEndpoint, ClientID: cc.IdPClientID,
				ClientSecret: cc.IdPClientSecret, IDToken: cc.IdPIDToken}
		}
		handler = signin.NewServiceHandler(sc)
	} else {
		h := signin.NewHandler(signin.HandlerConfig{
			Store: store, Principal: principal, Server: "conformance", ServerURL: serverURL,
			RedirectURL: conformanceRedirect, ClientMetadataURL: conformanceCIMD,
			ClientID: cc.ClientID, ClientSecret: cc.ClientSecret, ClientName: "baton-conformance",
			HTTPClient: hc,
		})
		handler = h
		mcpHTTP = &http.Client{Transport: h.Transport(hc.Transport), Timeout: hc.Timeout}
	}
	transport := &mcp.StreamableClientTransport{Endpoint: serverURL, HTTPClient: mcpHTTP, OAuthHandler: handler, MaxRetries: -1}
	client := mcp.NewClient(&mcp.Implementation{Name: "baton-conformance-client", Version: "0.1.0"}, nil)

	signIns := 0
	// retry runs op, signing in (as the browser would) each time it needs the user.
	retry := func(op func() error) error {
		for {
			err := op()
			if err == nil {
				return nil
			}
			var ns *signin.NeedsSignIn
			if !errors.As(err, &ns) {
				// go-sdk's Connect falls back from server/discover to initialize, and a
				// server may answer the fallback with another error: the sign-in the first
				// attempt started is still pending, so finish it.
				p, perr := store.PendingFor(ctx, principal, "conformance")
				if perr != nil || p == nil {
					return err
				}
				ns = &signin.NeedsSignIn{Server: p.Server, URL: p.AuthURL, State: p.State, Expires: p.Expires}
			}
			if signIns++; signIns > maxSignIns {
				return fmt.Errorf("still asked to sign in after %d sign-ins", maxSignIns)
			}
			if err := browse(ctx, hc, store, ns); err != nil {
				return err
			}
		}
	}

	var session *mcp.ClientSession
	if err := retry(func() (err error) {
		session, err = client.Connect(ctx, transport, nil)
		return err
	}); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer session.Close()

	var tools *mcp.ListToolsResult
	if err := retry(func() (err error) {
		tools, err = session.ListTools(ctx, nil)
		return err
	}); err != nil {
		return fmt.Errorf("tools/list: %w", err)
	}
	fmt.Fprintf(stdout, "scenario %q: %d tools\n", scenario, len(tools.Tools))
	for _, t := range tools.Tools {
		var res *mcp.CallToolResult
		if err := retry(func() (err error) {
			res, err = session.CallTool(ctx, &mcp.CallToolParams{Name: t.Name, Arguments: map[string]any{}})
			return err
		}); err != nil {
			return fmt.Errorf("tools/call %s: %w", t.Name, err)
		}
		fmt.Fprintf(stdout, "%s -> isError=%v\n", t.Name, res.IsError)
	}
	return nil
}

// browse plays the user's browser: it opens the authorization URL with redirects off (the
// suite's authorization server approves at once), reads code, state and iss from the
// redirect, and completes the sign-in as Baton's callback would.
func browse(ctx context.Context, hc *http.Client, store signin.Store, ns *signin.NeedsSignIn) error {
	noRedirect := *hc
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ns.URL, nil)
	if err != nil {
		return fmt.Errorf("authorization URL: %w", err)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		return fmt.Errorf("authorization request: %w", err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	loc, err := resp.Location()
	if err != nil {
		return fmt.Errorf("authorization server answered HTTP %d without a redirect", resp.StatusCode)
	}
	q := loc.Query()
	if e := q.Get("error"); e != "" {
		return fmt.Errorf("authorization refused: %s", e)
	}
	if _, err := signin.Complete(ctx, store, hc, q.Get("state"), q.Get("code"), q.Get("iss"), principal); err != nil {
		return fmt.Errorf("callback: %w", err)
	}
	return nil
}

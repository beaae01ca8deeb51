package mcpserver

import (
	"context"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
)

// A sign-in question goes to a client that takes URL-mode elicitation as
// elicitation/create in URL mode (its page, an elicitationId); the client's accept resumes
// the sign-in. A form-only client gets it as a form, as before.
func TestSignInAsURLElicitation(t *testing.T) {
	t.Parallel()
	e := newFakeEngine()
	var mu sync.Mutex
	var asked []*mcp.ElicitParams
	cs := connect(t, newTestServer(t, e), &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			mu.Lock()
			asked = append(asked, req.Params)
			mu.Unlock()
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
	})
	ctx := context.Background()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "research", Arguments: map[string]any{"prompt": "signin please"}})
	require.NoError(t, err)
	assert.False(t, res.IsError, text(t, res))
	require.Len(t, asked, 1, "asked once")
	assert.Equal(t, "url", asked[0].Mode)
	assert.Equal(t, "https://idp.example/authorize?state=s1", asked[0].URL)
	assert.Equal(t, "int-3", asked[0].ElicitationID)
	assert.Equal(t, "Please sign in to the vault.", asked[0].Message)
	<-e.started
	resumed := <-e.started
	require.Len(t, resumed.in.Resume, 1)
	assert.Equal(t, agui.ResumeResolved, resumed.in.Resume[0].Status)
	assert.JSONEq(t, `{}`, string(resumed.in.Resume[0].Payload), "an A2A sign-in's accept says only that the user is done")

	// A link that is not http(s) is never sent as a page to open: the question is a form.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "research", Arguments: map[string]any{"prompt": "mcpsignin please"}})
	require.NoError(t, err)
	require.Len(t, asked, 2)
	assert.Equal(t, "form", asked[1].Mode, "%+v", res)
	assert.Empty(t, asked[1].URL)
}

func TestSignInAsFormWithoutURLMode(t *testing.T) {
	t.Parallel()
	e := newFakeEngine()
	var asked []*mcp.ElicitParams
	cs := connect(t, newTestServer(t, e), &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked = append(asked, req.Params)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"text": "done"}}, nil
		},
	})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "research", Arguments: map[string]any{"prompt": "signin please"}})
	require.NoError(t, err)
	assert.Equal(t, `answer: {"text":"done"}`, text(t, res))
	require.Len(t, asked, 1)
	assert.Equal(t, "form", asked[0].Mode)
}

// An MCP sign-in asked in URL mode is answered with the action its schema wants.
func TestURLModeAnswerOfAnMCPSignIn(t *testing.T) {
	t.Parallel()
	q := agui.Interrupt{ID: "i1", Reason: reasonMCPAuthorize, Message: "Sign in to deploy",
		ResponseSchema: map[string]any{"type": "object", "properties": map[string]any{"action": map[string]any{"type": "string"}}},
		Metadata:       map[string]any{"authorizationUrl": "https://as.example/authorize"}}
	res, ok := inputRequests("th-1", []agui.Interrupt{q}, elicitModes{url: true})
	require.True(t, ok, "a URL-only client can be asked a sign-in")
	p, _ := res.InputRequests["i1"].(*mcp.ElicitParams)
	require.NotNil(t, p)
	assert.Equal(t, "url", p.Mode)
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{RequestState: res.RequestState,
		InputResponses: mcp.InputResponseMap{"i1": &mcp.ElicitResult{Action: "accept"}}}}
	in, err := answers(req)
	require.NoError(t, err)
	assert.JSONEq(t, `{"action":"accept"}`, string(in.Resume[0].Payload))

	_, ok = inputRequests("th-1", []agui.Interrupt{{ID: "i2", Reason: "input_required",
		ResponseSchema: map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}}}}, elicitModes{url: true})
	assert.False(t, ok, "a URL-only client cannot be asked a form")
}

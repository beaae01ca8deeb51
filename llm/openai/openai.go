// Package openai is the llm.Model for OpenAI-compatible Chat Completions
// servers (OpenAI, vLLM, Ollama, LiteLLM, ...), built on openai-go/v3.
//
// Design note: the SDK's own retries are off (option.WithMaxRetries(0)); every
// failure becomes an *llm.Error and the engine decides. A stream that ends
// without a finish_reason was cut short, so it is reported as a network error
// rather than as a completed turn. Tool-call chunks are normalised so that the
// first delta for an index always carries the id and the name: arguments that
// arrive before the name are held back, a missing id is synthesised, and ids
// or names repeated on later chunks are dropped.
package openai

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"github.com/baton-dev/baton/llm"
)

// defaultBaseURL is used when Config.BaseURL is empty.
const defaultBaseURL = "https://api.openai.com/v1"

// ErrNoModel is returned by New when Config.Model is empty.
var ErrNoModel = errors.New("openai: model is required")

// Config configures a Model.
type Config struct {
	// BaseURL is the API root including /v1; https://api.openai.com/v1 when empty.
	BaseURL string
	// Model is the model name sent with every request.
	Model string
	// APIKey is sent as a bearer token; none is sent when empty.
	APIKey string
	// HTTPClient replaces the SDK's default client (e.g. for tests or proxies).
	HTTPClient *http.Client
	// NoStreamUsage stops asking for the usage chunk (stream_options), for
	// servers that reject that field. Usage is then reported as zero.
	NoStreamUsage bool
}

// Model streams Chat Completions turns. It is safe for concurrent use.
type Model struct {
	client       openai.Client
	model        string
	includeUsage bool
	// base is the API root as logged (llm.SafeURL): errors name their endpoint under it.
	base string
}

var _ llm.Model = (*Model)(nil)

// New builds a Model. The API key is only handed to the SDK, never logged.
func New(cfg Config) (*Model, error) {
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, ErrNoModel
	}
	base := cfg.BaseURL
	if base == "" {
		base = defaultBaseURL
	}
	opts := []option.RequestOption{
		option.WithBaseURL(base),
		// Always set, even empty, so an OPENAI_API_KEY in the environment
		// never overrides the key the configuration chose.
		option.WithAPIKey(cfg.APIKey),
		option.WithMaxRetries(0),
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	safe := base
	if u, err := url.Parse(base); err == nil {
		safe = llm.SafeURL(u)
	}
	return &Model{
		client:       openai.NewClient(opts...),
		model:        cfg.Model,
		includeUsage: !cfg.NoStreamUsage,
		base:         strings.TrimSuffix(safe, "/"),
	}, nil
}

// Stream implements llm.Model.
func (m *Model) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Delta, error] {
	return func(yield func(llm.Delta, error) bool) {
		params, err := m.params(req)
		if err != nil {
			yield(llm.Delta{}, err)
			return
		}
		stream := m.client.Chat.Completions.NewStreaming(ctx, params)
		defer stream.Close()

		var (
			tools   = newToolCallNormaliser()
			refusal strings.Builder
			finish  string
			usage   llm.Usage
		)
		for stream.Next() {
			if ctx.Err() != nil {
				yield(llm.Delta{}, ctx.Err())
				return
			}
			chunk := stream.Current()
			if chunk.JSON.Usage.Valid() {
				usage = llm.Usage{
					InputTokens:  int(chunk.Usage.PromptTokens),
					OutputTokens: int(chunk.Usage.CompletionTokens),
				}
			}
			for _, ch := range chunk.Choices {
				if ch.Index != 0 {
					continue // n is never set, but be safe against odd servers
				}
				d := ch.Delta
				if d.Content != "" && !yield(llm.Delta{Text: d.Content}, nil) {
					return
				}
				refusal.WriteString(d.Refusal)
				for _, tc := range d.ToolCalls {
					for _, out := range tools.add(tc) {
						if !yield(llm.Delta{ToolCall: &out}, nil) {
							return
						}
					}
				}
				if ch.FinishReason != "" {
					finish = ch.FinishReason
				}
			}
		}
		if ctx.Err() != nil {
			yield(llm.Delta{}, ctx.Err())
			return
		}
		if err := stream.Err(); err != nil {
			yield(llm.Delta{}, m.classify(err, "/chat/completions"))
			return
		}
		if finish == "" {
			yield(llm.Delta{}, &llm.Error{
				Kind:    llm.ErrNetwork,
				Message: "the model stream ended before the turn finished",
				Err:     errors.New("openai: stream ended without finish_reason"),
				URL:     m.base + "/chat/completions",
			})
			return
		}
		// Calls whose name never arrived still have to reach the engine, which
		// will report the bad call back to the model.
		for _, out := range tools.flush() {
			if !yield(llm.Delta{ToolCall: &out}, nil) {
				return
			}
		}
		yield(llm.Delta{Done: &llm.Completion{
			FinishReason: finish,
			Refusal:      refusal.String(),
			Usage:        usage,
		}}, nil)
	}
}

func (m *Model) params(req *llm.Request) (openai.ChatCompletionNewParams, error) {
	p := openai.ChatCompletionNewParams{Model: shared.ChatModel(m.model)}
	if m.includeUsage {
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	}
	if req == nil {
		return p, &llm.Error{Kind: llm.ErrBadRequest, Message: "empty request", Err: errors.New("openai: nil request")}
	}
	for i, msg := range req.Messages {
		switch msg.Role {
		case llm.RoleSystem:
			p.Messages = append(p.Messages, openai.SystemMessage(msg.Content))
		case llm.RoleUser:
			p.Messages = append(p.Messages, openai.UserMessage(msg.Content))
		case llm.RoleTool:
			p.Messages = append(p.Messages, openai.ToolMessage(msg.Content, msg.ToolCallID))
		case llm.RoleAssistant:
			var a openai.ChatCompletionAssistantMessageParam
			if msg.Content != "" || len(msg.ToolCalls) == 0 {
				a.Content.OfString = openai.String(msg.Content)
			}
			for _, tc := range msg.ToolCalls {
				args := tc.Arguments
				if strings.TrimSpace(args) == "" {
					args = "{}"
				}
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID: tc.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{
							Name:      tc.Name,
							Arguments: args,
						},
					},
				})
			}
			p.Messages = append(p.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		default:
			return p, &llm.Error{
				Kind:    llm.ErrBadRequest,
				Message: fmt.Sprintf("message %d has unknown role %q", i, msg.Role),
				Err:     fmt.Errorf("openai: message %d: unknown role %q", i, msg.Role),
			}
		}
	}
	for _, t := range req.Tools {
		def := shared.FunctionDefinitionParam{Name: t.Name, Parameters: parameters(t.Parameters)}
		if t.Description != "" {
			def.Description = openai.String(t.Description)
		}
		p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(def))
	}
	return p, nil
}

// parameters defaults to an empty object schema: some servers reject a
// function without one.
func parameters(s map[string]any) shared.FunctionParameters {
	if len(s) == 0 {
		return shared.FunctionParameters{"type": "object", "properties": map[string]any{}}
	}
	return shared.FunctionParameters(s)
}

// classify is classifyError with the endpoint the request went to (the base URL and
// path, when the error does not say), for the logs.
func (m *Model) classify(err error, path string) *llm.Error {
	e := classifyError(err)
	var apiErr *openai.Error
	switch {
	case errors.As(err, &apiErr) && apiErr.Request != nil:
		e.URL = llm.SafeURL(apiErr.Request.URL)
	default:
		e.URL = llm.EndpointOf(err)
	}
	if e.URL == "" {
		e.URL = m.base + path
	}
	return e
}

// Probe checks, cheaply and with the key, that the provider answers and serves the
// configured model: GET /models. It returns nil, an *llm.Error (unreachable, unauthorised,
// ...), or an error wrapping llm.ErrUnknownModel when the list lacks the model.
func (m *Model) Probe(ctx context.Context) error {
	page, err := m.client.Models.List(ctx)
	if err != nil {
		return m.classify(err, "/models")
	}
	for _, md := range page.Data {
		if md.ID == m.model {
			return nil
		}
	}
	return fmt.Errorf("%w: %q is not among the %d models %s/models lists", llm.ErrUnknownModel, m.model, len(page.Data), m.base)
}

// classifyError turns an SDK or transport error into an *llm.Error.
func classifyError(err error) *llm.Error {
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		var h http.Header
		if apiErr.Response != nil {
			h = apiErr.Response.Header
		}
		return llm.AsContextOverflow(llm.NewHTTPError(apiErr.StatusCode, h, apiErr.Message, err), apiErr.Code, apiErr.Message)
	}
	var streamErr *ssestream.StreamError
	if errors.As(err, &streamErr) {
		return &llm.Error{Kind: llm.ErrServer, Message: "the model provider reported an error mid-stream", Err: err}
	}
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &syntaxErr) || errors.As(err, &typeErr) {
		return &llm.Error{Kind: llm.ErrServer, Message: "the model provider sent a malformed response", Err: err}
	}
	return &llm.Error{Kind: llm.ErrNetwork, Message: "the model provider could not be reached", Err: err}
}

// toolCallNormaliser enforces the llm.ToolCallDelta contract over the loose
// shapes OpenAI-compatible servers send.
type toolCallNormaliser struct {
	calls map[int64]*pendingCall
}

type pendingCall struct {
	id, name string
	started  bool   // the first (id+name) delta went out
	held     string // arguments received before the name
}

func newToolCallNormaliser() *toolCallNormaliser {
	return &toolCallNormaliser{calls: map[int64]*pendingCall{}}
}

func (n *toolCallNormaliser) add(tc openai.ChatCompletionChunkChoiceDeltaToolCall) []llm.ToolCallDelta {
	c, ok := n.calls[tc.Index]
	if !ok {
		c = &pendingCall{}
		n.calls[tc.Index] = c
	}
	if c.started {
		if tc.Function.Arguments == "" {
			return nil
		}
		return []llm.ToolCallDelta{{Index: int(tc.Index), Arguments: tc.Function.Arguments}}
	}
	if c.id == "" {
		c.id = tc.ID
	}
	if c.name == "" {
		c.name = tc.Function.Name
	}
	c.held += tc.Function.Arguments
	if c.name == "" {
		return nil
	}
	return []llm.ToolCallDelta{n.start(tc.Index, c)}
}

func (n *toolCallNormaliser) start(idx int64, c *pendingCall) llm.ToolCallDelta {
	if c.id == "" {
		c.id = newCallID()
	}
	c.started = true
	d := llm.ToolCallDelta{Index: int(idx), ID: c.id, Name: c.name, Arguments: c.held}
	c.held = ""
	return d
}

// flush starts the calls that never got a name, in index order, under a
// placeholder name so that the engine can reject them visibly.
func (n *toolCallNormaliser) flush() []llm.ToolCallDelta {
	var idxs []int64
	for idx, c := range n.calls {
		if !c.started {
			idxs = append(idxs, idx)
		}
	}
	slices.Sort(idxs)
	out := make([]llm.ToolCallDelta, 0, len(idxs))
	for _, idx := range idxs {
		c := n.calls[idx]
		c.name = "unnamed_tool"
		out = append(out, n.start(idx, c))
	}
	return out
}

func newCallID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}

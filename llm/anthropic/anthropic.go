// Package anthropic is the llm.Model for the Anthropic Messages API, built on
// anthropic-sdk-go/v2.
//
// Design note: the Messages API differs from Chat Completions in three ways
// this package hides. System messages go to the top-level system field. Tool
// results are tool_result blocks inside a user message, so consecutive tool
// and user messages are merged into one user turn (and consecutive assistant
// messages into one assistant turn). Tool calls stream as content blocks: a
// tool_use block start carries the id and name, input_json_delta events carry
// the arguments. Stop reasons are mapped onto the Chat Completions finish
// reasons the engine understands (end_turn → stop, tool_use → tool_calls,
// max_tokens → length, refusal → content_filter). SDK retries are off and the
// SDK reads no credential from the environment: the key comes only from Config.
package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/baton-dev/baton/llm"
)

// defaultBaseURL is used when Config.BaseURL is empty.
const defaultBaseURL = "https://api.anthropic.com"

// defaultMaxTokens is used when Config.MaxTokens is zero.
const defaultMaxTokens = 4096

// ErrNoModel is returned by New when Config.Model is empty.
var ErrNoModel = errors.New("anthropic: model is required")

// Config configures a Model.
type Config struct {
	// BaseURL is the API root without /v1; https://api.anthropic.com when empty. A
	// trailing /v1 is tolerated and removed, since the SDK adds it.
	BaseURL string
	// Model is the model name sent with every request.
	Model string
	// APIKey is sent both as a bearer token and as X-Api-Key, so that
	// gateways accepting only one of them work; none is sent when empty.
	APIKey string
	// MaxTokens caps each turn's output; 4096 when zero.
	MaxTokens int
	// HTTPClient replaces the default client (e.g. for tests or proxies).
	HTTPClient *http.Client
}

// Model streams Messages API turns. It is safe for concurrent use.
type Model struct {
	client    anthropic.Client
	model     string
	maxTokens int64
	// base is the API root as logged (llm.SafeURL): errors name their endpoint under it.
	base string
}

var _ llm.Model = (*Model)(nil)

// New builds a Model. The API key is only handed to the SDK, never logged.
func New(cfg Config) (*Model, error) {
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, ErrNoModel
	}
	base := strings.TrimSuffix(strings.TrimSuffix(cfg.BaseURL, "/"), "/v1")
	if base == "" {
		base = defaultBaseURL
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(base),
		option.WithMaxRetries(0),
		option.WithHTTPClient(hc),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey), option.WithHeader("X-Api-Key", cfg.APIKey))
	}
	maxTokens := int64(cfg.MaxTokens)
	if maxTokens <= 0 {
		maxTokens = defaultMaxTokens
	}
	safe := base
	if u, err := url.Parse(base); err == nil {
		safe = llm.SafeURL(u)
	}
	return &Model{client: anthropic.NewClient(opts...), model: cfg.Model, maxTokens: maxTokens, base: strings.TrimSuffix(safe, "/")}, nil
}

// Stream implements llm.Model.
func (m *Model) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Delta, error] {
	return func(yield func(llm.Delta, error) bool) {
		params, err := m.params(req)
		if err != nil {
			yield(llm.Delta{}, err)
			return
		}
		stream := m.client.Messages.NewStreaming(ctx, params)
		defer stream.Close()

		var (
			toolIdx   = map[int64]int{}  // content block index -> tool call index
			toolArgs  = map[int64]bool{} // tool blocks that received arguments
			stop      string
			refusal   string
			usage     llm.Usage
			completed bool
		)
		for stream.Next() {
			if ctx.Err() != nil {
				yield(llm.Delta{}, ctx.Err())
				return
			}
			ev := stream.Current()
			switch ev.Type {
			case "message_start":
				u := ev.Message.Usage
				usage.InputTokens = int(u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens)
				usage.OutputTokens = int(u.OutputTokens)
			case "content_block_start":
				cb := ev.ContentBlock
				switch cb.Type {
				case "tool_use":
					idx := len(toolIdx)
					toolIdx[ev.Index] = idx
					if !yield(llm.Delta{ToolCall: &llm.ToolCallDelta{Index: idx, ID: cb.ID, Name: cb.Name}}, nil) {
						return
					}
				case "text":
					if cb.Text != "" && !yield(llm.Delta{Text: cb.Text}, nil) {
						return
					}
				}
			case "content_block_delta":
				switch ev.Delta.Type {
				case "text_delta":
					if ev.Delta.Text != "" && !yield(llm.Delta{Text: ev.Delta.Text}, nil) {
						return
					}
				case "input_json_delta":
					idx, ok := toolIdx[ev.Index]
					if !ok || ev.Delta.PartialJSON == "" {
						continue
					}
					toolArgs[ev.Index] = true
					if !yield(llm.Delta{ToolCall: &llm.ToolCallDelta{Index: idx, Arguments: ev.Delta.PartialJSON}}, nil) {
						return
					}
				}
			case "content_block_stop":
				// A call without arguments streams no input_json_delta; the
				// engine expects a JSON object.
				if idx, ok := toolIdx[ev.Index]; ok && !toolArgs[ev.Index] {
					toolArgs[ev.Index] = true
					if !yield(llm.Delta{ToolCall: &llm.ToolCallDelta{Index: idx, Arguments: "{}"}}, nil) {
						return
					}
				}
			case "message_delta":
				if ev.Delta.StopReason != "" {
					stop = string(ev.Delta.StopReason)
				}
				if ev.Delta.StopDetails.Explanation != "" {
					refusal = ev.Delta.StopDetails.Explanation
				}
				if ev.Usage.OutputTokens > 0 {
					usage.OutputTokens = int(ev.Usage.OutputTokens)
				}
				if in := ev.Usage.InputTokens + ev.Usage.CacheCreationInputTokens + ev.Usage.CacheReadInputTokens; in > 0 {
					usage.InputTokens = int(in)
				}
			case "message_stop":
				completed = true
			}
		}
		if ctx.Err() != nil {
			yield(llm.Delta{}, ctx.Err())
			return
		}
		if err := stream.Err(); err != nil {
			yield(llm.Delta{}, m.classify(err, "/v1/messages"))
			return
		}
		if !completed || stop == "" {
			yield(llm.Delta{}, &llm.Error{
				Kind:    llm.ErrNetwork,
				Message: "the model stream ended before the turn finished",
				Err:     errors.New("anthropic: stream ended without message_stop"),
				URL:     m.base + "/v1/messages",
			})
			return
		}
		finish := finishReason(stop)
		if finish == llm.FinishContentFilter && refusal == "" {
			refusal = "the model declined to respond"
		}
		if finish != llm.FinishContentFilter {
			refusal = ""
		}
		yield(llm.Delta{Done: &llm.Completion{FinishReason: finish, Refusal: refusal, Usage: usage}}, nil)
	}
}

// finishReason maps an Anthropic stop_reason to a Chat Completions one.
func finishReason(stop string) string {
	switch stop {
	case "tool_use":
		return llm.FinishToolCalls
	case "max_tokens", "model_context_window_exceeded":
		return llm.FinishLength
	case "refusal":
		return llm.FinishContentFilter
	default: // end_turn, stop_sequence, pause_turn
		return llm.FinishStop
	}
}

func (m *Model) params(req *llm.Request) (anthropic.MessageNewParams, error) {
	p := anthropic.MessageNewParams{Model: anthropic.Model(m.model), MaxTokens: m.maxTokens}
	if req == nil {
		return p, &llm.Error{Kind: llm.ErrBadRequest, Message: "empty request", Err: errors.New("anthropic: nil request")}
	}
	var (
		role   llm.Role // role of the turn being built: user or assistant
		blocks []anthropic.ContentBlockParamUnion
	)
	flush := func() {
		if len(blocks) == 0 {
			return
		}
		if role == llm.RoleAssistant {
			p.Messages = append(p.Messages, anthropic.NewAssistantMessage(blocks...))
		} else {
			p.Messages = append(p.Messages, anthropic.NewUserMessage(blocks...))
		}
		blocks = nil
	}
	turn := func(r llm.Role) {
		if r != role {
			flush()
			role = r
		}
	}
	for i, msg := range req.Messages {
		switch msg.Role {
		case llm.RoleSystem:
			if msg.Content != "" {
				p.System = append(p.System, anthropic.TextBlockParam{Text: msg.Content})
			}
		case llm.RoleUser:
			turn(llm.RoleUser)
			blocks = append(blocks, anthropic.NewTextBlock(nonEmpty(msg.Content)))
		case llm.RoleTool:
			turn(llm.RoleUser)
			blocks = append(blocks, anthropic.NewToolResultBlock(msg.ToolCallID, nonEmpty(msg.Content), false))
		case llm.RoleAssistant:
			turn(llm.RoleAssistant)
			if msg.Content != "" {
				blocks = append(blocks, anthropic.NewTextBlock(msg.Content))
			}
			for _, tc := range msg.ToolCalls {
				blocks = append(blocks, anthropic.NewToolUseBlock(tc.ID, toolInput(tc.Arguments), tc.Name))
			}
		default:
			return p, &llm.Error{
				Kind:    llm.ErrBadRequest,
				Message: fmt.Sprintf("message %d has unknown role %q", i, msg.Role),
				Err:     fmt.Errorf("anthropic: message %d: unknown role %q", i, msg.Role),
			}
		}
	}
	flush()
	for _, t := range req.Tools {
		tp := anthropic.ToolParam{Name: t.Name, InputSchema: inputSchema(t.Parameters)}
		if t.Description != "" {
			tp.Description = anthropic.String(t.Description)
		}
		p.Tools = append(p.Tools, anthropic.ToolUnionParam{OfTool: &tp})
	}
	return p, nil
}

// nonEmpty keeps text blocks valid: the API rejects empty ones.
func nonEmpty(s string) string {
	if s == "" {
		return "(empty)"
	}
	return s
}

// toolInput passes the model's arguments through when they are a JSON
// object; the API rejects anything else, so other text becomes {}.
func toolInput(args string) any {
	trimmed := strings.TrimSpace(args)
	if strings.HasPrefix(trimmed, "{") && json.Valid([]byte(trimmed)) {
		return json.RawMessage(trimmed)
	}
	return map[string]any{}
}

// inputSchema splits a JSON Schema object into the SDK's fields.
func inputSchema(s map[string]any) anthropic.ToolInputSchemaParam {
	var out anthropic.ToolInputSchemaParam
	extra := map[string]any{}
	for k, v := range s {
		switch k {
		case "type":
		case "properties":
			out.Properties = v
		case "required":
			switch r := v.(type) {
			case []string:
				out.Required = r
			case []any:
				for _, x := range r {
					if str, ok := x.(string); ok {
						out.Required = append(out.Required, str)
					}
				}
			}
		default:
			extra[k] = v
		}
	}
	if out.Properties == nil {
		out.Properties = map[string]any{}
	}
	if len(extra) > 0 {
		out.ExtraFields = extra
	}
	return out
}

// classify turns an SDK or transport error into an *llm.Error.
// classify is classifyError with the endpoint the request went to (the base URL and
// path, when the error does not say), for the logs.
func (m *Model) classify(err error, path string) *llm.Error {
	e := classifyError(err)
	var apiErr *anthropic.Error
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
// configured model: GET /v1/models/{model} (aliases resolve). It returns nil, an
// *llm.Error (unreachable, unauthorised, ...), or an error wrapping llm.ErrUnknownModel
// when the provider does not know the model (404).
func (m *Model) Probe(ctx context.Context) error {
	_, err := m.client.Models.Get(ctx, m.model, anthropic.ModelGetParams{})
	if err == nil {
		return nil
	}
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusNotFound {
		return fmt.Errorf("%w: %s/v1/models does not know %q", llm.ErrUnknownModel, m.base, m.model)
	}
	return m.classify(err, "/v1/models/"+url.PathEscape(m.model))
}

func classifyError(err error) *llm.Error {
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) {
		var h http.Header
		if apiErr.Response != nil {
			h = apiErr.Response.Header
		}
		status := apiErr.StatusCode
		if status == 0 || status == http.StatusOK {
			// An error event inside a 200 stream (e.g. overloaded_error).
			return &llm.Error{Kind: streamErrorKind(string(apiErr.Type())), Message: "the model provider reported an error mid-stream", Err: err}
		}
		return llm.AsContextOverflow(llm.NewHTTPError(status, h, apiErr.Message, err), string(apiErr.ErrorCode()), apiErr.Message)
	}
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &syntaxErr) || errors.As(err, &typeErr) {
		return &llm.Error{Kind: llm.ErrServer, Message: "the model provider sent a malformed response", Err: err}
	}
	if strings.Contains(err.Error(), "received error while streaming") {
		return &llm.Error{Kind: llm.ErrServer, Message: "the model provider reported an error mid-stream", Err: err}
	}
	return &llm.Error{Kind: llm.ErrNetwork, Message: "the model provider could not be reached", Err: err}
}

func streamErrorKind(typ string) llm.ErrorKind {
	switch typ {
	case "rate_limit_error":
		return llm.ErrRateLimited
	case "authentication_error", "permission_error":
		return llm.ErrAuth
	case "invalid_request_error", "not_found_error", "request_too_large":
		return llm.ErrBadRequest
	default: // overloaded_error, api_error, unknown
		return llm.ErrServer
	}
}

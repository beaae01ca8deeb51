package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tmaxmax/go-sse"
)

// Tools that declare execution.taskSupport "required" can only be called as MCP tasks
// (task-augmented tools/call), which Baton does not do: every call fails ("requires task
// augmentation"). go-sdk v1.8.0's Tool has no execution field and drops it when it decodes
// tools/list, so the declaration is read from the tools/list response as it passes through
// the connection (untouched) on stdio, and from the HTTP answer to tools/list on streamable
// HTTP, where wrapping the connection would hide the SDK's own session-state hook from it.

// taskTools records, per tool name, whether the server requires task augmentation.
type taskTools struct {
	mu       sync.Mutex
	required map[string]bool
}

func (t *taskTools) isRequired(name string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.required[name]
}

// note reads a tools/list result; anything else is ignored.
func (t *taskTools) note(result json.RawMessage) {
	var list struct {
		Tools []struct {
			Name      string `json:"name"`
			Execution *struct {
				TaskSupport string `json:"taskSupport"`
			} `json:"execution"`
		} `json:"tools"`
	}
	if json.Unmarshal(result, &list) != nil || len(list.Tools) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.required == nil {
		t.required = map[string]bool{}
	}
	for _, tool := range list.Tools {
		t.required[tool.Name] = tool.Execution != nil && tool.Execution.TaskSupport == "required"
	}
}

// taskSupportTransport observes the tools/list responses of a transport for taskTools.
type taskSupportTransport struct {
	mcp.Transport
	seen *taskTools
}

// Connect implements mcp.Transport.
func (t *taskSupportTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &taskSupportConn{Connection: c, seen: t.seen}, nil
}

type taskSupportConn struct {
	mcp.Connection
	seen *taskTools
}

// Read implements mcp.Connection: the message is passed on as it came.
func (c *taskSupportConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if resp, ok := msg.(*jsonrpc.Response); ok && err == nil && bytes.Contains(resp.Result, []byte(`"taskSupport"`)) {
		c.seen.note(resp.Result)
	}
	return msg, err
}

// maxListAnswer bounds what is read of an HTTP answer to tools/list before the SDK gets it;
// an answer beyond it reaches the SDK unobserved.
const maxListAnswer = 8 << 20

// taskSupportRoundTripper observes, for taskTools, the HTTP answers to tools/list of a
// streamable HTTP connection. The answer (JSON, or an SSE stream) is read up to its JSON-RPC
// response before the SDK gets it, so that the declarations are noted when the SDK's
// ListTools returns; the SDK then reads the same bytes, and the rest of the stream, as they
// came.
type taskSupportRoundTripper struct {
	base http.RoundTripper
	seen *taskTools
}

// RoundTrip implements http.RoundTripper.
func (t *taskSupportRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if !isToolsList(req) {
		return t.base.RoundTrip(req)
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK || resp.Body == nil {
		return resp, err
	}
	var read bytes.Buffer
	src := io.TeeReader(io.LimitReader(resp.Body, maxListAnswer), &read)
	media, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if media == "text/event-stream" {
		for ev, err := range sse.Read(src, &sse.ReadConfig{MaxEventSize: maxListAnswer}) {
			if err != nil || t.noteAnswer([]byte(ev.Data)) {
				break
			}
		}
	} else if data, err := io.ReadAll(src); err == nil {
		t.noteAnswer(data)
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(&read, resp.Body), resp.Body}
	return resp, nil
}

// noteAnswer notes the result of a JSON-RPC response; it reports whether msg was one
// (rather than a request or a notification the server sent first).
func (t *taskSupportRoundTripper) noteAnswer(msg []byte) bool {
	var resp struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if json.Unmarshal(msg, &resp) != nil || len(resp.ID) == 0 || (resp.Result == nil && resp.Error == nil) {
		return false
	}
	if resp.Result != nil {
		t.seen.note(resp.Result)
	}
	return true
}

// isToolsList reports whether req is a POST of a tools/list request.
func isToolsList(req *http.Request) bool {
	// A tools/list request is small (a cursor at most); larger bodies are not read twice.
	if req.Method != http.MethodPost || req.GetBody == nil || req.ContentLength > 64<<10 {
		return false
	}
	body, err := req.GetBody()
	if err != nil {
		return false
	}
	defer body.Close()
	head, _ := io.ReadAll(io.LimitReader(body, 64<<10))
	var msg struct {
		Method string `json:"method"`
	}
	return json.Unmarshal(head, &msg) == nil && msg.Method == "tools/list"
}

// withoutTaskTools drops the tools that need MCP tasks, logging each once per server.
func (s *server) withoutTaskTools(tools []*mcp.Tool) []*mcp.Tool {
	out := tools[:0:0]
	for _, t := range tools {
		if s.taskTools.isRequired(t.Name) {
			s.mu.Lock()
			first := !s.taskLogged[t.Name]
			if s.taskLogged == nil {
				s.taskLogged = map[string]bool{}
			}
			s.taskLogged[t.Name] = true
			s.mu.Unlock()
			if first {
				s.log.Warn("mcp tool left out of the catalog: it requires MCP tasks (execution.taskSupport \"required\"), which Baton does not support", "tool", t.Name)
			}
			continue
		}
		out = append(out, t)
	}
	return out
}

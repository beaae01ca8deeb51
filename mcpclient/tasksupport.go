package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tools that declare execution.taskSupport "required" can only be called as MCP tasks
// (task-augmented tools/call), which Baton does not do: every call fails ("requires task
// augmentation"). go-sdk v1.8.0's Tool has no execution field and drops it when it decodes
// tools/list, so the declaration is read from the tools/list response as it passes through
// the connection (untouched). Only stdio connections are observed: wrapping the streamable
// HTTP connection would hide the SDK's own session-state hook from it.

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

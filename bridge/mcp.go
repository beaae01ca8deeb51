package bridge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// This file renders MCP tool results into what the LLM reads (DESIGN §5).
// Everything that comes from the MCP server (text, structured content,
// resource text, error text) is untrusted: it goes after the tag line and
// through Untrusted, so that a server cannot forge a tag. The sentences that
// Baton itself writes stay on the tag line.

// MCPOK renders a successful MCP tool result: "[OK]" on the first line, then
// the content (text as text, structured content as JSON, images, audio and
// resources as short descriptions). note, when not empty, is an extra line
// that Baton adds before the content, e.g. that an elicitation was declined.
func MCPOK(res *mcp.CallToolResult, note string) string {
	body := MCPContent(res)
	if note != "" {
		body = strings.TrimRight(note+"\n"+body, "\n")
	}
	return OK(body)
}

// MCPError renders an MCP failure reported to the model without a retry
// request: "[ERROR]", then reason (Baton's sentence, kept on one line), then
// detail (the server's text, may be empty).
func MCPError(reason, detail string) string {
	body := strings.Join(strings.Fields(reason), " ")
	if strings.TrimSpace(detail) != "" {
		body += "\n" + detail
	}
	return Error(body)
}

// MCPErrorText returns the text of a tool result that reported an error
// (isError), as a single string, for error messages and retry signals.
func MCPErrorText(res *mcp.CallToolResult) string {
	t := strings.TrimSpace(MCPContent(res))
	if t == "" {
		return "the tool reported an error without a message"
	}
	return t
}

// MCPContent renders the content of a tool result as plain text, without
// tag or escaping. Text blocks are joined by blank lines. Structured content
// is added as compact JSON unless a text block already carries the same
// JSON value (go-sdk servers send both).
func MCPContent(res *mcp.CallToolResult) string {
	if res == nil {
		return ""
	}
	var parts []string
	structuredShown := res.StructuredContent == nil
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			if !structuredShown && mcpSameJSON(c.Text, res.StructuredContent) {
				structuredShown = true
			}
			parts = append(parts, c.Text)
		case *mcp.ImageContent:
			parts = append(parts, fmt.Sprintf("[image: %s, %s]", mcpMIME(c.MIMEType), mcpSize(len(c.Data))))
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio: %s, %s]", mcpMIME(c.MIMEType), mcpSize(len(c.Data))))
		case *mcp.ResourceLink:
			parts = append(parts, mcpResourceLink(c))
		case *mcp.EmbeddedResource:
			parts = append(parts, mcpEmbedded(c))
		case nil:
		default:
			parts = append(parts, fmt.Sprintf("[content of type %T omitted]", c))
		}
	}
	if !structuredShown {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	return strings.Join(parts, "\n\n")
}

// mcpSameJSON reports whether text is a JSON encoding of v.
func mcpSameJSON(text string, v any) bool {
	text = strings.TrimSpace(text)
	if text == "" || (text[0] != '{' && text[0] != '[') {
		return false
	}
	var a, b any
	if json.Unmarshal([]byte(text), &a) != nil {
		return false
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return false
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	if d.Decode(&b) != nil {
		return false
	}
	return reflect.DeepEqual(a, b)
}

func mcpMIME(m string) string {
	if m == "" {
		return "unknown type"
	}
	return m
}

func mcpSize(n int) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d bytes", n)
	case n < 1024*1024:
		return fmt.Sprintf("%.1f KiB", float64(n)/1024)
	default:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1024*1024))
	}
}

func mcpResourceLink(l *mcp.ResourceLink) string {
	var b strings.Builder
	b.WriteString("[resource link: ")
	name := l.Title
	if name == "" {
		name = l.Name
	}
	if name != "" {
		b.WriteString(name)
		b.WriteString(" ")
	}
	b.WriteString("<" + l.URI + ">")
	if l.MIMEType != "" {
		b.WriteString(", " + l.MIMEType)
	}
	if l.Size != nil {
		b.WriteString(", " + mcpSize(int(*l.Size)))
	}
	b.WriteString("]")
	if l.Description != "" {
		b.WriteString(" " + l.Description)
	}
	return b.String()
}

func mcpEmbedded(e *mcp.EmbeddedResource) string {
	r := e.Resource
	if r == nil {
		return "[embedded resource without contents]"
	}
	if r.Blob != nil {
		return fmt.Sprintf("[resource <%s>: %s, %s]", r.URI, mcpMIME(r.MIMEType), mcpSize(len(r.Blob)))
	}
	head := fmt.Sprintf("[resource <%s>", r.URI)
	if r.MIMEType != "" {
		head += ", " + r.MIMEType
	}
	return head + "]\n" + r.Text
}

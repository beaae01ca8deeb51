package bridge

import (
	"encoding/json"
	"fmt"
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
// is added as compact JSON only when the result has no text block.
func MCPContent(res *mcp.CallToolResult) string {
	if res == nil {
		return ""
	}
	var parts []string
	// Structured content is sent once (DESIGN §5): the text content carries it (servers
	// send both, often in different shapes, e.g. pretty-printed, or as prose); only a
	// result without text gets it as JSON.
	structuredShown := res.StructuredContent == nil
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			structuredShown = true
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

package mcpserver

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// eventFiles is the engine's CUSTOM event that carries a completed delegation's file
// parts (coordinator.CustomFiles); its value has the shape of files below.
const eventFiles = "baton.files"

// files is the value of a baton.files event, as the surface reads it.
type files struct {
	ToolCallID string `json:"toolCallId"`
	Agent      string `json:"agent"`
	TaskID     string `json:"taskId"`
	Files      []file `json:"files"`
	Omitted    int    `json:"omitted"`
}

type file struct {
	Name       string `json:"name"`
	MediaType  string `json:"mediaType"`
	ArtifactID string `json:"artifactId"`
	URI        string `json:"uri"`
	Bytes      []byte `json:"bytes"`
	Size       int64  `json:"size"`
}

// maxEmbeddedBytes is the most inline file content one tool result embeds (the engine
// keeps no more per delegation: a2a.MaxFileBytes). A file above it is named in a text
// item with its size instead.
const maxEmbeddedBytes = 1 << 20

// readFiles decodes a baton.files event's value; ok is false for one it cannot read.
func readFiles(v any) (files, bool) {
	var fs files
	b, err := json.Marshal(v)
	if err != nil || json.Unmarshal(b, &fs) != nil || fs.ToolCallID == "" {
		return files{}, false
	}
	return fs, true
}

// fileContent is the content that hands a delegation's files to the MCP client: an
// embedded resource for a file given inline, a resource_link for one given by URI, and a
// text item for a file left out (too large, or beyond the count the engine keeps).
func fileContent(fs files) []mcp.Content {
	var out []mcp.Content
	room := int64(maxEmbeddedBytes)
	for i, f := range fs.Files {
		name := f.Name
		if name == "" {
			name = fmt.Sprintf("file-%d", i+1)
		}
		switch {
		case f.URI != "":
			out = append(out, &mcp.ResourceLink{URI: f.URI, Name: name, MIMEType: f.MediaType})
		case f.Bytes != nil && int64(len(f.Bytes)) <= room:
			room -= int64(len(f.Bytes))
			rc := &mcp.ResourceContents{URI: fileURI(fs, f, name), MIMEType: f.MediaType}
			if strings.HasPrefix(f.MediaType, "text/") {
				rc.Text = string(f.Bytes)
			} else {
				rc.Blob = f.Bytes
			}
			out = append(out, &mcp.EmbeddedResource{Resource: rc})
		default:
			out = append(out, &mcp.TextContent{Text: fmt.Sprintf("[file not embedded: %s (%s), %d bytes: above the %d bytes Baton embeds in one result]",
				name, orUnknown(f.MediaType), f.Size, maxEmbeddedBytes)})
		}
	}
	if fs.Omitted > 0 {
		out = append(out, &mcp.TextContent{Text: fmt.Sprintf("[%d more files not included]", fs.Omitted)})
	}
	return out
}

// fileURI names an inline file: the agent, its task and artifact, and the file's name.
// It identifies the file within the result; Baton serves no resources to read it from.
func fileURI(fs files, f file, name string) string {
	return "a2a://" + url.PathEscape(fs.Agent) + "/tasks/" + url.PathEscape(fs.TaskID) +
		"/artifacts/" + url.PathEscape(f.ArtifactID) + "/" + url.PathEscape(name)
}

func orUnknown(mediaType string) string {
	if mediaType == "" {
		return "unknown type"
	}
	return mediaType
}

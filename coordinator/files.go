package coordinator

import (
	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/subagent"
)

// CustomFiles is the CUSTOM event that carries the file parts of a sub-agent's completed
// task (its value: [Files]), emitted before SUBAGENT_FINISHED. The model reads a file as a
// "[file: name (type)]" line of the tool result; a surface that can hand files on (the MCP
// server's embedded resources) reads them here. Inline content is bounded by
// subagent.MaxFileBytes per delegation.
const CustomFiles = "baton.files"

// Files is the value of a baton.files event.
type Files struct {
	// ToolCallID is the tool call whose result the files belong to.
	ToolCallID string `json:"toolCallId"`
	Agent      string `json:"agent"`
	TaskID     string `json:"taskId,omitempty"`
	Files      []File `json:"files"`
	// Omitted counts files left out beyond the first 32.
	Omitted int `json:"omitted,omitempty"`
}

// File is one file of a baton.files event: inline (Bytes, or only Size when it was left
// out for subagent.MaxFileBytes) or by reference (URI).
type File struct {
	Name       string `json:"name,omitempty"`
	MediaType  string `json:"mediaType,omitempty"`
	ArtifactID string `json:"artifactId,omitempty"`
	URI        string `json:"uri,omitempty"`
	Bytes      []byte `json:"bytes,omitempty"`
	Size       int64  `json:"size,omitempty"`
}

// emitFiles emits the files of a completed delegation, when it has any.
func (d *subagentCall) emitFiles(res *subagent.Result) {
	if res == nil || len(res.Files) == 0 {
		return
	}
	v := Files{ToolCallID: d.callID, Agent: d.agent.Name, TaskID: res.TaskID, Omitted: res.FilesOmitted}
	for _, f := range res.Files {
		v.Files = append(v.Files, File{Name: f.Name, MediaType: f.MediaType, ArtifactID: f.ArtifactID, URI: f.URI, Bytes: f.Bytes, Size: f.Size})
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	d.r.emit(&agui.Custom{Name: CustomFiles, Value: v, SubagentRunID: d.subID})
}

// Package prompts renders the text Baton puts in front of the model: the system prompt with
// the agent roster, the tool list, every result tag and the rules for acting on them.
//
// The prompt is an embedded text/template so that wording changes are reviewed as text and
// pinned by a golden file. Everything interpolated into it comes from configuration, agent
// cards or the frontend, so each value is flattened to one line and capped: an agent card
// cannot add lines that look like instructions or tags.
package prompts

import (
	"bytes"
	_ "embed"
	"fmt"
	"strings"
	"text/template"

	"github.com/baton-dev/baton/bridge"
)

//go:embed system.tmpl
var systemText string

var systemTmpl = template.Must(template.New("system").Parse(systemText))

// maxField caps every interpolated value; descriptions beyond this carry no routing value.
const maxField = bridge.MaxDescription

// Agent describes one sub-agent in the roster.
type Agent struct {
	Name        string
	Description string
	Skills      []Skill
}

// Skill is one advertised capability of a sub-agent, from its agent card.
type Skill struct {
	Name        string
	Description string
}

// Tool describes a tool the model may call (MCP tools, ask_user, frontend tools).
type Tool struct {
	Name        string
	Description string
}

// ContextItem is one AG-UI context entry supplied by the frontend.
type ContextItem struct {
	Description string
	Value       string
}

// SystemInput is everything the system prompt is rendered from.
type SystemInput struct {
	Agents        []Agent
	Tools         []Tool
	FrontendTools []Tool
	Context       []ContextItem
	// Instructions are the operator's own instructions (llm.system_prompt), appended
	// after Baton's. They come from the configuration, not from a peer, so they keep
	// their lines; they are capped at MaxInstructions.
	Instructions string
}

// MaxInstructions caps the operator's instructions (llm.system_prompt); the configuration
// refuses longer ones, and this cap only guards other callers.
const MaxInstructions = 64 << 10

// System renders the system prompt.
func System(in SystemInput) (string, error) {
	clean := SystemInput{}
	for _, a := range in.Agents {
		ca := Agent{Name: line(a.Name), Description: line(a.Description)}
		for _, s := range a.Skills {
			ca.Skills = append(ca.Skills, Skill{Name: line(s.Name), Description: line(s.Description)})
		}
		clean.Agents = append(clean.Agents, ca)
	}
	for _, t := range in.Tools {
		clean.Tools = append(clean.Tools, Tool{Name: line(t.Name), Description: line(t.Description)})
	}
	for _, t := range in.FrontendTools {
		clean.FrontendTools = append(clean.FrontendTools, Tool{Name: line(t.Name), Description: line(t.Description)})
	}
	for _, c := range in.Context {
		clean.Context = append(clean.Context, ContextItem{Description: line(c.Description), Value: line(c.Value)})
	}
	clean.Instructions = strings.TrimSpace(strings.ToValidUTF8(in.Instructions, "\uFFFD"))
	if len(clean.Instructions) > MaxInstructions {
		clean.Instructions = strings.ToValidUTF8(clean.Instructions[:MaxInstructions], "")
	}
	var b bytes.Buffer
	if err := systemTmpl.Execute(&b, clean); err != nil {
		return "", fmt.Errorf("render system prompt: %w", err)
	}
	return b.String(), nil
}

// line flattens s to a single capped line, through the one function that every
// description from outside goes through (bridge.Flatten).
func line(s string) string { return bridge.Flatten(s, maxField) }

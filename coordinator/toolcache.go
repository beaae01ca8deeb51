package coordinator

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/bridge"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/mcpclient"
	"github.com/baton-dev/baton/prompts"
	"github.com/baton-dev/baton/subagent"
)

// versionedTools is a ToolServer that says when its catalogue changed (mcpclient.Registry):
// the engine then builds the backend tools once per change instead of once per run.
type versionedTools interface {
	ToolsVersion() uint64
}

// backendTools is the part of a run's tools that depends only on the configuration, the
// agents' current cards and the MCP catalogue: the tools array with its JSON schemas, the
// lookup maps and, rendered on first use, the system prompt of a run that adds nothing of
// its own. It is built when one of those changed and shared by every run: read-only.
type backendTools struct {
	llm     []llm.Tool // clipped: a run that appends gets a copy
	agents  map[string]*Agent
	mcp     map[string]mcpclient.Tool
	backend []string // sorted

	agentKeys  []agentKey
	mcpVersion uint64

	systemOnce sync.Once
	system     string
	systemErr  error

	// withFrontend holds the system prompts of runs that add frontend tools (and nothing
	// else of their own), by the tools' names and descriptions (frontendKey): a client
	// that declares the same tools on every run (an MCP agent tool's marker, a UI's
	// actions) shares one rendering. Bounded: at most maxFrontendPrompts entries (emptied
	// when full), of keys up to maxFrontendKey bytes (longer ones are rendered per run).
	frontendMu   sync.Mutex
	withFrontend map[string]string
}

// Bounds of backendTools.withFrontend.
const (
	maxFrontendPrompts = 32
	maxFrontendKey     = 8 << 10
)

// agentKey identifies what an agent's tool and prompt entry were built from.
type agentKey struct {
	description string
	skills      *subagent.Skill // the skills slice of the card read (a new read, a new slice)
	nskills     int
}

func keyOf(a *Agent) agentKey {
	d, s := a.describe()
	k := agentKey{description: d, nskills: len(s)}
	if len(s) > 0 {
		k.skills = &s[0]
	}
	return k
}

// Parameters of the built-in tools, built once: the maps are shared and never modified.
var (
	agentParams   = agentParameters()
	askUserParams = askUserParameters()
)

// toolCache holds the backend tools of the current configuration, shared by runs: it
// rebuilds them when an agent's card or the MCP catalogue changed.
type toolCache struct {
	server ToolServer // nil when no MCP servers are configured
	agents []*Agent   // the configured agents, in the configuration's order
	// instructions are the configured system prompt's own text (Config.SystemPrompt).
	instructions string

	mu  sync.Mutex
	cur *backendTools
}

// get returns the current backend tools, rebuilding them when an agent's card or the MCP
// catalogue changed. A ToolServer that does not report versions gets a fresh build on
// every run, as before.
func (c *toolCache) get() *backendTools {
	var ver uint64
	cacheable := c.server == nil
	if vt, ok := c.server.(versionedTools); ok {
		ver, cacheable = vt.ToolsVersion(), true
	}
	c.mu.Lock()
	cur := c.cur
	c.mu.Unlock()
	if cacheable && cur != nil && cur.mcpVersion == ver && c.sameAgents(cur.agentKeys) {
		return cur
	}
	b := c.build(ver)
	if cacheable {
		c.mu.Lock()
		c.cur = b
		c.mu.Unlock()
	}
	return b
}

// sameAgents reports whether keys describe the agents as they are now.
func (c *toolCache) sameAgents(keys []agentKey) bool {
	if len(keys) != len(c.agents) {
		return false
	}
	for i, a := range c.agents {
		if keyOf(a) != keys[i] {
			return false
		}
	}
	return true
}

// build builds the backend tools for the MCP catalogue version ver.
func (c *toolCache) build(ver uint64) *backendTools {
	b := &backendTools{agents: map[string]*Agent{}, mcp: map[string]mcpclient.Tool{}, mcpVersion: ver}
	for _, a := range c.agents {
		b.agentKeys = append(b.agentKeys, keyOf(a))
		b.agents[a.Name] = a
		b.backend = append(b.backend, a.Name)
		b.llm = append(b.llm, llm.Tool{Name: a.Name, Description: agentDescription(a), Parameters: agentParams})
	}
	if c.server != nil {
		for _, mt := range c.server.Tools() {
			if _, clash := b.agents[mt.Name]; clash {
				continue
			}
			b.mcp[mt.Name] = mt
			b.backend = append(b.backend, mt.Name)
			schema := mt.InputSchema
			if schema == nil {
				schema = map[string]any{"type": "object"}
			}
			// The server's description is untrusted: flattened and capped like the system
			// prompt's (DESIGN §5).
			b.llm = append(b.llm, llm.Tool{Name: mt.Name, Description: bridge.Flatten(mt.Description, bridge.MaxDescription), Parameters: schema})
		}
	}
	if _, clash := b.mcp[askUserTool]; !clash {
		b.backend = append(b.backend, askUserTool)
		b.llm = append(b.llm, llm.Tool{Name: askUserTool, Description: "Ask the user a question and wait for the answer (ends this turn; the answer arrives as [ANSWERED] or [DECLINED]).", Parameters: askUserParams})
	}
	b.llm = b.llm[:len(b.llm):len(b.llm)]
	sort.Strings(b.backend)
	return b
}

// systemPrompt renders the run's system prompt; a run with no frontend tools, no context
// and nothing hidden by the policy shares the prompt rendered once for its backend tools.
func (c *toolCache) systemPrompt(in *agui.RunAgentInput, t *toolset) (string, error) {
	if t.base == nil || len(in.Context) > 0 || len(t.hidden) > 0 {
		return prompts.System(c.systemInput(in, t))
	}
	b := t.base
	if len(t.frontend) > 0 {
		return b.frontendPrompt(frontendKey(in, t), func() (string, error) { return prompts.System(c.systemInput(in, t)) })
	}
	b.systemOnce.Do(func() { b.system, b.systemErr = prompts.System(c.systemInput(in, t)) })
	return b.system, b.systemErr
}

// frontendKey is what a run's frontend tools put into its system prompt: their names and
// descriptions, in the input's order ("" when that is longer than maxFrontendKey).
func frontendKey(in *agui.RunAgentInput, t *toolset) string {
	var k strings.Builder
	for _, ft := range in.Tools {
		if _, ok := t.frontend[ft.Name]; !ok {
			continue
		}
		if k.Len()+len(ft.Name)+len(ft.Description)+2 > maxFrontendKey {
			return ""
		}
		k.WriteString(ft.Name)
		k.WriteByte(0)
		k.WriteString(ft.Description)
		k.WriteByte(0)
	}
	return k.String()
}

// frontendPrompt returns the system prompt cached under key, or renders it (render) and
// keeps it; an empty key is never cached, nor a failed rendering.
func (b *backendTools) frontendPrompt(key string, render func() (string, error)) (string, error) {
	if key == "" {
		return render()
	}
	b.frontendMu.Lock()
	p, ok := b.withFrontend[key]
	b.frontendMu.Unlock()
	if ok {
		return p, nil
	}
	p, err := render()
	if err != nil {
		return p, err
	}
	b.frontendMu.Lock()
	if b.withFrontend == nil {
		b.withFrontend = map[string]string{}
	}
	if len(b.withFrontend) >= maxFrontendPrompts {
		// Full: started afresh, so that the sets of tools in use now get in.
		clear(b.withFrontend)
	}
	b.withFrontend[key] = p
	b.frontendMu.Unlock()
	return p, nil
}

// toolset returns the tools of one run: the shared backend tools (built once per
// configuration and card or catalogue change) plus the run's frontend tools.
func (c *toolCache) toolset(in *agui.RunAgentInput) *toolset {
	b := c.get()
	t := &toolset{llm: b.llm, agents: b.agents, mcp: b.mcp, backend: b.backend, base: b}
	for _, ft := range in.Tools {
		if ft.Name == "" || slices.Contains(t.backend, ft.Name) {
			continue // a backend tool of the same name wins; the frontend cannot shadow it
		}
		params := map[string]any{"type": "object"}
		if len(ft.Parameters) > 0 {
			var p map[string]any
			if json.Unmarshal(ft.Parameters, &p) == nil && p != nil {
				params = p
			}
		}
		if t.frontend == nil {
			t.frontend = map[string]agui.Tool{}
		}
		t.frontend[ft.Name] = ft
		t.llm = append(t.llm, llm.Tool{Name: ft.Name, Description: ft.Description, Parameters: params}) // b.llm is clipped: this copies
	}
	return t
}

// systemInput is what the run's system prompt is rendered from: the agents and tools the
// policy does not hide, the run's frontend tools and context, and the configured
// instructions.
func (c *toolCache) systemInput(in *agui.RunAgentInput, t *toolset) prompts.SystemInput {
	var si prompts.SystemInput
	for _, a := range c.agents {
		if t.hidden[a.Name] {
			continue
		}
		description, skills := a.describe()
		pa := prompts.Agent{Name: a.Name, Description: description}
		for _, s := range skills {
			pa.Skills = append(pa.Skills, prompts.Skill{Name: s.Name, Description: s.Description})
		}
		si.Agents = append(si.Agents, pa)
	}
	for _, name := range t.backend {
		if t.hidden[name] {
			continue
		}
		if mt, ok := t.mcp[name]; ok {
			si.Tools = append(si.Tools, prompts.Tool{Name: mt.Name, Description: mt.Description})
		}
		if name == askUserTool {
			si.Tools = append(si.Tools, prompts.Tool{Name: askUserTool, Description: "ask the user a question when nothing else can settle it; the answer comes back as [ANSWERED] or [DECLINED]"})
		}
	}
	for _, ft := range in.Tools {
		if _, ok := t.frontend[ft.Name]; ok {
			si.FrontendTools = append(si.FrontendTools, prompts.Tool{Name: ft.Name, Description: ft.Description})
		}
	}
	for _, c := range in.Context {
		si.Context = append(si.Context, prompts.ContextItem{Description: c.Description, Value: c.Value})
	}
	si.Instructions = c.instructions
	return si
}

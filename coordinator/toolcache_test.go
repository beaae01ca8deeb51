package coordinator

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/mcpclient"
	"github.com/baton-dev/baton/subagent"
)

// describedAgent is a fakeAgent whose card can change.
type describedAgent struct {
	fakeAgent
	mu   sync.Mutex
	info subagent.Info
}

func (d *describedAgent) Info() (subagent.Info, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.info, true
}

// versioned is fakeTools with a catalogue version.
type versioned struct {
	fakeTools
	ver   uint64
	lists int
}

func (v *versioned) ToolsVersion() uint64 { return v.ver }
func (v *versioned) Tools() []mcpclient.Tool {
	v.lists++
	return v.fakeTools.Tools()
}

func TestBackendToolsSharedUntilChanged(t *testing.T) {
	ag := &describedAgent{info: subagent.Info{Description: "first card", Skills: []subagent.Skill{{Name: "s1"}}}}
	mcp := &versioned{fakeTools: fakeTools{tools: []mcpclient.Tool{{Name: "files__read", Description: "reads"}}}}
	e := newStartedEngine(t, Config{Model: &fakeModel{}, Tools: mcp, Agents: []Agent{{Name: "research", Client: ag}}})
	plain := &agui.RunAgentInput{}

	t1, t2 := e.tools.toolset(plain), e.tools.toolset(plain)
	require.Same(t, t1.base, t2.base, "a second run shares the backend tools")
	assert.Equal(t, 1, mcp.lists, "the catalogue is listed once")
	assert.Same(t, &t1.llm[0], &t2.llm[0], "the tools array is shared")
	p1, err := e.tools.systemPrompt(plain, t1)
	require.NoError(t, err)
	p2, err := e.tools.systemPrompt(plain, t2)
	require.NoError(t, err)
	assert.Equal(t, p1, p2)
	assert.Contains(t, p1, "first card")

	// A frontend tool is the run's own: the shared array is not written.
	withFrontend := &agui.RunAgentInput{Tools: []agui.Tool{{Name: "show_map", Description: "shows a map"}}}
	tf := e.tools.toolset(withFrontend)
	require.Len(t, tf.llm, len(t1.llm)+1)
	assert.Len(t, e.tools.toolset(plain).llm, len(t1.llm), "the frontend tool stays out of the shared tools")
	pf, err := e.tools.systemPrompt(withFrontend, tf)
	require.NoError(t, err)
	assert.Contains(t, pf, "show_map")
	p3, _ := e.tools.systemPrompt(plain, e.tools.toolset(plain))
	assert.NotContains(t, p3, "show_map")

	// A policy that hides a tool does not change the shared array either.
	th := e.tools.toolset(plain)
	th.restrict(func(name string) bool { return name != "files__read" })
	assert.Len(t, e.tools.toolset(plain).llm, len(t1.llm))
	ph, _ := e.tools.systemPrompt(plain, th)
	assert.NotContains(t, ph, "files__read")

	// A new card rebuilds them.
	ag.mu.Lock()
	ag.info = subagent.Info{Description: "second card"}
	ag.mu.Unlock()
	t3 := e.tools.toolset(plain)
	require.NotSame(t, t1.base, t3.base)
	p4, _ := e.tools.systemPrompt(plain, t3)
	assert.Contains(t, p4, "second card")
	assert.Contains(t, t3.llm[0].Description, "second card")

	// So does a new catalogue.
	mcp.tools = append(mcp.tools, mcpclient.Tool{Name: "files__write"})
	mcp.ver++
	t4 := e.tools.toolset(plain)
	require.NotSame(t, t3.base, t4.base)
	assert.True(t, t4.hasMCP("files__write"))
	assert.Equal(t, 3, mcp.lists, "listed again for the new card and for the new catalogue")
}

func TestBackendToolsWithoutVersionsBuiltPerRun(t *testing.T) {
	mcp := &fakeTools{tools: []mcpclient.Tool{{Name: "files__read"}}}
	e := newStartedEngine(t, Config{Model: &fakeModel{}, Tools: mcp})
	t1 := e.tools.toolset(&agui.RunAgentInput{})
	mcp.tools = []mcpclient.Tool{{Name: "files__write"}}
	t2 := e.tools.toolset(&agui.RunAgentInput{})
	assert.True(t, t1.hasMCP("files__read"))
	assert.True(t, t2.hasMCP("files__write"), "a ToolServer without versions is listed on every run")
}

func TestSystemPromptSharedForTheSameFrontendTools(t *testing.T) {
	t.Parallel()
	e := newStartedEngine(t, Config{Model: &fakeModel{}, Agents: []Agent{{Name: "research", Client: &fakeAgent{}}}})
	in := func(tools ...agui.Tool) *agui.RunAgentInput { return &agui.RunAgentInput{Tools: tools} }
	render := func(in *agui.RunAgentInput) string {
		p, err := e.tools.systemPrompt(in, e.tools.toolset(in))
		require.NoError(t, err)
		return p
	}
	mapTool := agui.Tool{Name: "show_map", Description: "shows a map"}
	first := render(in(mapTool))
	require.Contains(t, first, "shows a map")
	base := e.tools.toolset(in()).base
	require.Len(t, base.withFrontend, 1, "kept for the next run with the same tools")
	assert.Equal(t, first, render(in(mapTool)))
	assert.Len(t, base.withFrontend, 1, "the same tools: the same entry")

	// Another description is another prompt.
	other := render(in(agui.Tool{Name: "show_map", Description: "shows a city plan"}))
	assert.Contains(t, other, "shows a city plan")
	assert.NotContains(t, other, "shows a map")
	assert.Len(t, base.withFrontend, 2)

	// Context, or a tool the policy hides, is the run's own: rendered, never kept.
	withContext := in(mapTool)
	withContext.Context = []agui.ContextItem{{Description: "city", Value: "Lyon"}}
	assert.Contains(t, render(withContext), "Lyon")
	assert.Len(t, base.withFrontend, 2)

	// Bounded: at most maxFrontendPrompts sets of tools (started afresh when full, so
	// that the latest get in), and no key past maxFrontendKey.
	for i := range maxFrontendPrompts + 5 {
		p := render(in(agui.Tool{Name: fmt.Sprintf("tool_%d", i), Description: "d"}))
		require.Contains(t, p, fmt.Sprintf("tool_%d", i))
		require.LessOrEqual(t, len(base.withFrontend), maxFrontendPrompts)
	}
	latest := in(agui.Tool{Name: fmt.Sprintf("tool_%d", maxFrontendPrompts+4), Description: "d"})
	_, kept := base.withFrontend[frontendKey(latest, e.tools.toolset(latest))]
	assert.True(t, kept, "the latest set of tools is kept")
	long := agui.Tool{Name: "long", Description: strings.Repeat("x", maxFrontendKey)}
	assert.Equal(t, "", frontendKey(in(long), e.tools.toolset(in(long))))
}

// BenchmarkSystemPromptFrontend: the system prompt of a run that adds one frontend tool (an
// MCP agent tool's run adds its marker), rendered per run (each iteration a new set of
// tools) and shared (the same tools every run).
//
//	go test -run '^$' -bench BenchmarkSystemPromptFrontend -benchmem ./coordinator/
func BenchmarkSystemPromptFrontend(b *testing.B) {
	e := newStartedEngine(b, Config{Model: &fakeModel{}, Agents: []Agent{{Name: "research", Client: &fakeAgent{}}, {Name: "travel", Client: &fakeAgent{}}}})
	for _, shared := range []bool{false, true} {
		b.Run(map[bool]string{false: "rendered", true: "shared"}[shared], func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				name := "marker"
				if !shared {
					name = fmt.Sprintf("marker_%d", i)
				}
				in := &agui.RunAgentInput{Tools: []agui.Tool{{Name: name, Description: "marks a run"}}}
				if _, err := e.tools.systemPrompt(in, e.tools.toolset(in)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

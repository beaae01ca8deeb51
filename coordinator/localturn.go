package coordinator

import "github.com/baton-dev/baton/llm"

// LocalModel is a model that answers some requests itself, calling no provider: the MCP
// agent tool's stand-in, whose turns are one call of the named agent and then that call's
// result. Such a turn has no effect outside the run, so the run does not journal it as a
// model call (design/mcp-server.md, "Where an agent tool's time goes"): on SQLite that is
// two synchronous store writes per turn, on the path of every agent-tool call.
type LocalModel interface {
	// AnswersLocally reports whether the model answers req without calling a provider.
	AnswersLocally(req *llm.Request) bool
}

// answersLocally reports whether the run's model (the fallback chain's current link)
// answers req itself (LocalModel).
func answersLocally(r *Run, req *llm.Request) bool {
	m := r.e.cfg.Model
	if c, ok := m.(fallbackChain); ok {
		m = c.At(r.sp.link)
	}
	l, ok := m.(LocalModel)
	return ok && l.AnswersLocally(req)
}

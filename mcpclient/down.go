package mcpclient

import "strings"

// Unreachable tells a call of a tool that is missing from the catalog because its server
// is down apart from a call of a tool that does not exist. A server's tools are offered
// once it has connected (a server never connected has no catalog to offer) and stay
// offered, as last listed, while it is disconnected; a name of the form "<server>__…"
// for a configured server that is not connected gets a StatusUnreachable result (and a
// background reconnection), so that the model is told to try later or elsewhere rather
// than that it misspelled the tool. ok is false when the name belongs to no down server.
func (r *Registry) Unreachable(name string) (res Result, ok bool) {
	for _, s := range r.servers {
		prefix := toolName(s.cfg.Name, "")
		if !strings.HasPrefix(name, prefix) || len(name) == len(prefix) {
			continue
		}
		if s.perUser() {
			// Connected per principal: a name missing from its catalog is unknown.
			return Result{}, false
		}
		s.mu.Lock()
		alive := s.alive()
		s.mu.Unlock()
		if alive {
			return Result{}, false
		}
		s.kick()
		tool := strings.TrimPrefix(name, prefix)
		if len(tool) > 64 {
			tool = tool[:64]
		}
		return Result{Status: StatusUnreachable, Tool: name, Server: s.cfg.Name, ToolName: tool,
			Message: "The server is not connected."}, true
	}
	return Result{}, false
}

package mcpclient

import (
	"fmt"
	"strings"

	"github.com/baton-dev/baton/bridge"
)

// Unreachable tells a call of a tool that is missing from the catalog because its server
// is down apart from a call of a tool that does not exist. A server's tools are offered
// once it has connected (a server never connected has no catalog to offer) and stay
// offered, as last listed, while it is disconnected; a name of the form "<server>__…"
// for a configured server that is not connected gets the [UNREACHABLE] result (and a
// background reconnection), so that the model is told to try later or elsewhere rather
// than that it misspelled the tool. ok is false when the name belongs to no down server.
func (r *Registry) Unreachable(name string) (result string, ok bool) {
	for _, s := range r.servers {
		prefix := toolName(s.cfg.Name, "")
		if !strings.HasPrefix(name, prefix) || len(name) == len(prefix) {
			continue
		}
		s.mu.Lock()
		alive := s.alive()
		s.mu.Unlock()
		if alive {
			return "", false
		}
		s.kick()
		return bridge.Unreachable(fmt.Sprintf("MCP server %q (tool %q: the server is not connected)", s.cfg.Name, bridge.UntrustedN(strings.TrimPrefix(name, prefix), 64))), true
	}
	return "", false
}

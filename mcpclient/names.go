package mcpclient

import "github.com/baton-dev/baton/internal/toolname"

// toolName is the name the LLM sees for tool on server: "<server>__<tool>",
// through the one sanitiser that config and engine use too (package toolname).
func toolName(server, tool string) string { return toolname.MCP(server, tool) }

// rawName is one catalog entry before naming: its server and its own tool name.
type rawName struct{ server, tool string }

// catalogNames names every entry of the catalog. A name that several raw names
// sanitise to is kept by the one that sanitises without loss (if any); the others get a
// hash of their raw name appended. The result depends only on the set of raw names,
// never on their order or on what connected first, so a parked call resumed after a
// restart finds its tool under the same name.
func catalogNames(raws []rawName) []string {
	names := make([]string, len(raws))
	count := map[string]int{}
	for i, r := range raws {
		names[i] = toolName(r.server, r.tool)
		count[names[i]]++
	}
	for i, r := range raws {
		if count[names[i]] > 1 && !(toolname.Exact(r.server) && toolname.Exact(r.tool) && names[i] == r.server+"__"+r.tool) {
			names[i] = toolname.Disambiguate(names[i], r.server, r.tool)
		}
	}
	return names
}

package mcpclient

import "github.com/baton-dev/baton/internal/toolname"

// toolName is the name the LLM sees for tool on server: "<server>__<tool>",
// through the one sanitiser that config and engine use too (package toolname).
func toolName(server, tool string) string { return toolname.MCP(server, tool) }

// rawName is one catalog entry before naming: its server and its own tool name.
type rawName struct{ server, tool string }

// catalogNames names every entry of the catalog. A name that several raw names
// sanitise to is kept by the one that sanitises without loss, if exactly one does; the
// others (all of them, when none or several are lossless: server "a" with tool "_b" and
// server "a_" with tool "b" are both lossless as "a___b") get a hash of their raw name
// appended. The result depends only on the set of raw names, never on their order or on
// what connected first, so a parked call resumed after a restart finds its tool under
// the same name. collisions maps each name that several raw names shared to those raw
// names, for the log.
func catalogNames(raws []rawName) (names []string, collisions map[string][]rawName) {
	names = make([]string, len(raws))
	count := map[string]int{}
	lossless := map[string]int{}
	seen := map[rawName]bool{}
	for i, r := range raws {
		names[i] = toolName(r.server, r.tool)
		if seen[r] {
			continue // one server listing the same tool twice is not a collision
		}
		seen[r] = true
		count[names[i]]++
		if isLossless(r, names[i]) {
			lossless[names[i]]++
		}
	}
	for i, r := range raws {
		name := names[i]
		if count[name] < 2 {
			continue
		}
		if collisions == nil {
			collisions = map[string][]rawName{}
		}
		if !containsRaw(collisions[name], r) {
			collisions[name] = append(collisions[name], r)
		}
		if lossless[name] == 1 && isLossless(r, name) {
			continue
		}
		names[i] = toolname.Disambiguate(name, r.server, r.tool)
	}
	return names, collisions
}

// isLossless reports whether r sanitises to name without losing anything.
func isLossless(r rawName, name string) bool {
	return toolname.Exact(r.server) && toolname.Exact(r.tool) && name == r.server+"__"+r.tool
}

func containsRaw(list []rawName, r rawName) bool {
	for _, x := range list {
		if x == r {
			return true
		}
	}
	return false
}

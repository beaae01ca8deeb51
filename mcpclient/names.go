package mcpclient

import (
	"fmt"
	"hash/fnv"
	"strings"
)

// maxToolName is the longest tool name LLM providers accept.
const maxToolName = 64

// sanitize maps s onto [A-Za-z0-9_-]: every other rune becomes '_'.
func sanitize(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// toolName is the name the LLM sees for tool on server: "<server>__<tool>",
// sanitised and at most 64 characters. A name that must be shortened keeps a
// hash of the full name, so that two long names do not collide.
func toolName(server, tool string) string {
	full := sanitize(server) + "__" + sanitize(tool)
	if len(full) <= maxToolName {
		return full
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(server + "\x00" + tool))
	suffix := fmt.Sprintf("_%08x", h.Sum32())
	return full[:maxToolName-len(suffix)] + suffix
}

// uniqueName returns name, or name with a numeric suffix when taken already
// holds it (two raw names that sanitise alike).
func uniqueName(name string, taken map[string]bool) string {
	if !taken[name] {
		return name
	}
	for i := 2; ; i++ {
		suffix := fmt.Sprintf("_%d", i)
		base := name
		if len(base)+len(suffix) > maxToolName {
			base = base[:maxToolName-len(suffix)]
		}
		if c := base + suffix; !taken[c] {
			return c
		}
	}
}

// Package toolname is the one place where names from configuration and from MCP servers
// become the tool names the model sees (DESIGN §5: [A-Za-z0-9_-], at most 64 characters).
//
// Config validation, the MCP catalog, the engine and the resume of a parked call all use
// it, so that one raw name always gives one tool name, in every process and after a
// restart. Names stay readable: every character outside the set becomes one "_" (per
// character, not per byte), and a hash of the raw name is appended only where the name
// had to be shortened or where two raw names would otherwise share a tool name.
package toolname

import (
	"fmt"
	"hash/fnv"
	"strings"
)

// Max is the longest tool name LLM providers accept.
const Max = 64

// suffixLen is the length of "_" and eight hex digits.
const suffixLen = 9

// clean maps s onto [A-Za-z0-9_-]: every other character becomes one "_".
func clean(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if allowed(r) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

func allowed(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-'
}

// hash is a stable 32-bit hash of the raw parts, as "_xxxxxxxx".
func hash(parts ...string) string {
	h := fnv.New32a()
	for i, p := range parts {
		if i > 0 {
			_, _ = h.Write([]byte{0})
		}
		_, _ = h.Write([]byte(p))
	}
	return fmt.Sprintf("_%08x", h.Sum32())
}

// fit shortens name to Max, keeping a hash of the raw parts when it must cut.
func fit(name string, raw ...string) string {
	if len(name) <= Max {
		return name
	}
	return name[:Max-suffixLen] + hash(raw...)
}

// Sanitize is the tool name of a configured name (an A2A agent, an MCP server).
func Sanitize(name string) string {
	return fit(clean(name), name)
}

// MCP is the tool name of tool on MCP server: "<server>__<tool>", sanitised.
func MCP(server, tool string) string {
	return fit(clean(server)+"__"+clean(tool), server, tool)
}

// Exact reports whether raw is already a valid tool name, so that sanitising it loses
// nothing.
func Exact(raw string) bool {
	if raw == "" || len(raw) > Max {
		return false
	}
	for _, r := range raw {
		if !allowed(r) {
			return false
		}
	}
	return true
}

// Disambiguate returns name with a hash of the raw parts, within Max: the stable name
// of one of several raw names that sanitise alike. It depends only on the raw parts,
// never on the order in which names were seen, so it survives a restart.
func Disambiguate(name string, raw ...string) string {
	suffix := hash(raw...)
	if len(name)+len(suffix) > Max {
		name = name[:Max-len(suffix)]
	}
	return name + suffix
}

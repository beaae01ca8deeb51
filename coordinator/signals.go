package coordinator

import (
	"slices"
	"sort"
	"strings"

	"github.com/baton-dev/baton/bridge"
	"github.com/baton-dev/baton/failure"
	"github.com/baton-dev/baton/internal/editdist"
)

// Compact retry signals (DESIGN §7): the model already has the whole tool list, so a
// signal names only what is useful now.

// nextActions lists what the model can usefully call after a refused or failed call of
// tool: the tool itself (a fixed call can succeed) when the run may still call it (its
// guard says so; without one, every tool of t), and ask_user.
func nextActions(g *failure.Guard, t *toolset, tool string) []string {
	allowed := allowedNow(g, t)
	out := []string{}
	if tool != "" && tool != askUserTool && slices.Contains(allowed, tool) {
		out = append(out, tool)
	}
	if slices.Contains(allowed, askUserTool) {
		out = append(out, askUserTool)
	}
	return out
}

// unknownNext is valid_next_actions for unknown_action: the known names closest to the
// one requested that the run may call now, then ask_user; at most
// bridge.MaxValidNextActions.
func unknownNext(g *failure.Guard, t *toolset, requested string) []string {
	allowed := allowedNow(g, t)
	out := closestNames(without(allowed, askUserTool), requested, bridge.MaxValidNextActions-1)
	if slices.Contains(allowed, askUserTool) {
		out = append(out, askUserTool)
	}
	return out
}

// allowedNow is what the run may call now: its guard's valid next actions, or without a
// guard every backend tool of t.
func allowedNow(g *failure.Guard, t *toolset) []string {
	switch {
	case g != nil:
		return g.ValidNextActions()
	case t != nil:
		return t.backend
	}
	return nil
}

// knownActions is known_actions for unknown_action: the backend tools closest to the one
// requested (a denied tool stays known), at most bridge.MaxKnownActions.
func knownActions(t *toolset, requested string) []string {
	if t == nil {
		return []string{}
	}
	return closestNames(t.backend, requested, bridge.MaxKnownActions)
}

// closestNames returns at most n of names, closest to requested first (edit distance of
// the lower-cased names; ties in name order).
func closestNames(names []string, requested string, n int) []string {
	req := strings.ToLower(requested)
	if len(req) > 128 {
		req = req[:128] // the distance is quadratic; a longer request is no name
	}
	type scored struct {
		name string
		d    int
	}
	all := make([]scored, 0, len(names))
	for _, name := range names {
		all = append(all, scored{name, editdist.Levenshtein(req, strings.ToLower(name))})
	}
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].d != all[j].d {
			return all[i].d < all[j].d
		}
		return all[i].name < all[j].name
	})
	out := []string{}
	for _, s := range all {
		if len(out) == n {
			break
		}
		out = append(out, s.name)
	}
	return out
}

func without(names []string, name string) []string {
	return slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == name })
}

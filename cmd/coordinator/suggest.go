package main

import (
	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/internal/config"
	"github.com/baton-dev/baton/llm/scripted"
	"github.com/baton-dev/baton/mcpclient"
	"github.com/baton-dev/baton/subagent"
)

// maxSuggestionsPerAgent keeps one chatty agent card from filling the page's examples.
const maxSuggestionsPerAgent = 2

// suggestions returns the example prompts of the chat page, drawn from what this deployment
// has: with the offline demo model, the prompts its rules answer for the tools present
// (the demo stack's are the demo's); otherwise the examples the agents' cards give for
// their skills. Card text is the agent's, shown to the user as a button label only.
func suggestions(cfg *config.Config, agents []coordinator.Agent, registry *mcpclient.Registry) []string {
	if cfg.LLM.Provider == config.ProviderScripted {
		var tools []string
		for _, a := range agents {
			tools = append(tools, a.Name)
		}
		if registry != nil {
			for _, t := range registry.Tools() {
				tools = append(tools, t.Name)
			}
		}
		return scripted.Examples(scripted.DefaultRules(), tools)
	}
	var out []string
	for _, a := range agents {
		skills := a.Skills
		if info, ok := a.Client.(interface{ Info() (subagent.Info, bool) }); ok {
			if i, read := info.Info(); read {
				skills = i.Skills
			}
		}
		n := 0
		for _, s := range skills {
			for _, ex := range s.Examples {
				if n == maxSuggestionsPerAgent || len(ex) > 120 || ex == "" {
					continue
				}
				out = append(out, ex)
				n++
			}
		}
	}
	return out
}

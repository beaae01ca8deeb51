package main

import (
	"context"
	"log/slog"

	"github.com/baton-dev/baton/internal/config"
	"github.com/baton-dev/baton/server"
)

// fallbackProbe is the readiness of one llm.fallback model: its configuration, then its
// own background probe (nil for the scripted model).
type fallbackProbe struct {
	name  string
	model config.LLM
	probe *modelProbe
}

// newFallbackProbes builds a probe for each llm.fallback model (not started), so that
// /readyz lists every model of the chain.
func newFallbackProbes(cfg *config.Config, log *slog.Logger) []fallbackProbe {
	var out []fallbackProbe
	for _, f := range cfg.LLM.Fallback {
		l := config.LLM{Provider: f.Provider, BaseURL: f.BaseURL, Model: f.Model, APIKeyEnv: f.APIKeyEnv}
		fp := fallbackProbe{name: fallbackName(f), model: l}
		if _, prober, err := newProvider(cfg, f.Provider, f.BaseURL, f.Model, f.APIKey(), nil); err == nil && prober != nil && modelProblem(l) == nil {
			fp.probe = newModelProbe(prober, f.Model, log.With("fallback", f.Model))
		}
		out = append(out, fp)
	}
	return out
}

// fallbackChecks are the readiness checks of the chain: the primary (as the model check
// has it) and each fallback, keyed by model name under "models".
func fallbackChecks(cfg *config.Config, primary func(context.Context) error, fbs []fallbackProbe) []server.ReadyCheck {
	if len(fbs) == 0 {
		return nil
	}
	checks := []server.ReadyCheck{{Group: server.GroupModels, Name: modelName(cfg), Check: primary}}
	for _, fb := range fbs {
		checks = append(checks, server.ReadyCheck{Group: server.GroupModels, Name: fb.name, Check: func(context.Context) error {
			if err := modelProblem(fb.model); err != nil {
				return err
			}
			if fb.probe != nil {
				return fb.probe.Ready()
			}
			return nil
		}})
	}
	return checks
}

// fallbackName is the name a fallback model is known by: its model, or its provider
// (the scripted model has no model name).
func fallbackName(f config.FallbackModel) string {
	if f.Model != "" {
		return f.Model
	}
	return f.Provider
}

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/baton-dev/baton/internal/startstop"
	"github.com/baton-dev/baton/llm"
)

// Probe intervals: the model is checked at start, then every modelProbeEvery while it
// answers, and every modelProbeRetry while it does not (a fixed key or a server back up
// shows in /readyz within that). Each probe is one cheap authenticated GET.
const (
	modelProbeEvery   = 5 * time.Minute
	modelProbeRetry   = 30 * time.Second
	modelProbeTimeout = 10 * time.Second
)

// errModelChecking is /readyz's model entry until the first probe has answered.
var errModelChecking = errors.New("checking: the first probe of the model provider has not answered yet")

// modelProber is a provider that can check its key, endpoint and model cheaply
// (openai.Model and anthropic.Model: their models endpoint).
type modelProber interface {
	Probe(ctx context.Context) error
}

// modelProbe is the background service that keeps /readyz honest about the model: a
// wrong key, a wrong URL, a server that is down or a model the provider does not serve
// show as the model being down, with the reason, instead of "up" until the first run
// fails. The reason in /readyz names the kind of failure; the log line carries the URL and
// the cause (never the key), once per change.
type modelProbe struct {
	prober       modelProber
	model        string
	log          *slog.Logger
	every, retry time.Duration
	timeout      time.Duration

	mu      sync.Mutex
	checked bool
	state   error // nil: up
	last    string

	service *startstop.Service
}

// newModelProbe returns the probe service for p (not started).
func newModelProbe(p modelProber, model string, log *slog.Logger) *modelProbe {
	mp := &modelProbe{prober: p, model: model, log: log, every: modelProbeEvery, retry: modelProbeRetry, timeout: modelProbeTimeout}
	mp.service = startstop.NewService("model probe", mp.loop)
	return mp
}

// Start runs the first probe at once and then the periodic ones, until Stop or until ctx
// ends. Starting a started probe does nothing.
func (p *modelProbe) Start(ctx context.Context) { p.service.Start(ctx) }

// Stop ends the service and waits for a probe in flight to return (it is cancelled), or
// until ctx ends. A probe stopped stays stopped; its last result is still Ready's.
func (p *modelProbe) Stop(ctx context.Context) error { return p.service.Stop(ctx) }

// Ready is the model's readiness: nil when the last probe succeeded, else its reason.
func (p *modelProbe) Ready() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.checked {
		return errModelChecking
	}
	return p.state
}

func (p *modelProbe) loop(ctx context.Context) {
	for {
		wait := p.every
		if p.check(ctx) != nil {
			wait = p.retry
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// check runs one probe and records its result; a probe cut short by Stop records nothing.
func (p *modelProbe) check(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, p.timeout)
	err := p.prober.Probe(pctx)
	cancel()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	reason := modelReason(p.model, err)
	p.mu.Lock()
	changed := !p.checked || reason == nil != (p.state == nil) || (reason != nil && reason.Error() != p.last)
	p.checked, p.state = true, reason
	p.last = ""
	if reason != nil {
		p.last = reason.Error()
	}
	p.mu.Unlock()
	if changed {
		if reason == nil {
			p.log.Info("model provider ready", "model", p.model)
		} else {
			p.log.Warn("model provider not ready", append([]any{"reason", reason.Error(), "model", p.model, "err", err}, llm.LogAttrs(err)...)...)
		}
	}
	return reason
}

// modelReason is what /readyz says about a failed probe: the kind of failure in words an
// operator acts on, without the URL or the provider's text (those go to the log).
func modelReason(model string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, llm.ErrUnknownModel) {
		return fmt.Errorf("unknown model: the provider does not serve %q (llm.model)", model)
	}
	var perr *llm.Error
	if errors.As(err, &perr) {
		switch perr.Kind {
		case llm.ErrAuth:
			return fmt.Errorf("unauthorised: the provider refused the API key (HTTP %d); check llm.api_key_env", perr.Status)
		case llm.ErrNetwork, llm.ErrTimeout:
			return errors.New("unreachable: the model provider could not be reached; check llm.base_url (the log has the URL and the cause)")
		case llm.ErrBadRequest:
			return fmt.Errorf("down: the provider answered HTTP %d to its models endpoint; check llm.base_url", perr.Status)
		default:
			return fmt.Errorf("down: %s", perr.Message)
		}
	}
	return errors.New("unreachable: the model provider could not be reached (the log has the cause)")
}

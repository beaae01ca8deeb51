package llm

import (
	"context"
	"iter"
)

// Link is one model of a Chain: a provider's model and the names it is known by.
type Link struct {
	// Provider is "openai", "anthropic" or "scripted", for spans and metrics.
	Provider string
	// Name is the model's name (llm.model, llm.fallback[].model), for pricing and the
	// journal.
	Name  string
	Model Model
	// Window is the model's context window in tokens (llm.context_window,
	// llm.fallback[].context_window, or a table of well-known models); 0: unknown. A
	// request the run's model refuses as too long goes only to a link with a larger one.
	Window int
}

// Chain is a model with fallbacks (llm.fallback): the first link is the configured
// model, the others are tried in order when it fails. The chain itself never switches:
// the engine decides when a failure warrants a switch (transient_provider after its
// retries, never an auth failure or a refusal) and which link a run is on, since a run
// stays on the model it switched to while other runs keep the primary. Streaming the
// chain streams its first link.
//
// Every link speaks the provider-neutral Request, so a conversation started on an
// OpenAI-compatible model (its tool calls and tool results included) goes on unchanged on
// an Anthropic one: each provider translates the same messages into its own wire form.
type Chain struct {
	links []Link
}

// NewChain returns the chain of primary followed by fallbacks. Links without a Model
// are dropped.
func NewChain(primary Link, fallbacks ...Link) *Chain {
	c := &Chain{}
	for _, l := range append([]Link{primary}, fallbacks...) {
		if l.Model != nil {
			c.links = append(c.links, l)
		}
	}
	return c
}

// Len is the number of links.
func (c *Chain) Len() int { return len(c.links) }

// Link returns link i (0: the primary).
func (c *Chain) Link(i int) Link { return c.links[i] }

// At returns link i as a Model whose completions name the link's model
// (Completion.Model), so that usage is priced with the prices of the model that
// answered.
func (c *Chain) At(i int) Model { return named{c.links[i]} }

// Stream streams a turn from the primary.
func (c *Chain) Stream(ctx context.Context, req *Request) iter.Seq2[Delta, error] {
	return c.At(0).Stream(ctx, req)
}

// named stamps the link's model name on its completions.
type named struct{ l Link }

func (n named) Stream(ctx context.Context, req *Request) iter.Seq2[Delta, error] {
	return func(yield func(Delta, error) bool) {
		for d, err := range n.l.Model.Stream(ctx, req) {
			if d.Done != nil && d.Done.Model == "" {
				c := *d.Done
				c.Model = n.l.Name
				d.Done = &c
			}
			if !yield(d, err) {
				return
			}
		}
	}
}

package mcpserver

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// progress sends a call's progress notifications, coalesced: at most one per interval,
// the latest message winning, and the last one sent when the interval has passed.
type progress struct {
	// send is nil when the client sent no progressToken: nothing is sent.
	send    func(ctx context.Context, n float64, msg string)
	every   time.Duration
	last    time.Time
	pending string
	n       float64
	timer   *time.Timer
}

// newProgress returns the progress of a call: silent without a progressToken.
func newProgress(req *mcp.CallToolRequest, every time.Duration) *progress {
	p := &progress{every: every}
	token := req.Params.GetProgressToken()
	if token == nil || req.Session == nil {
		return p
	}
	p.send = func(ctx context.Context, n float64, msg string) {
		// A client that went away gets nothing more; the call's end reports it.
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: n, Message: msg})
	}
	return p
}

// note records msg as the latest progress.
func (p *progress) note(msg string) {
	if p.send != nil {
		p.pending = msg
	}
}

// flush sends the latest progress when the interval since the last has passed, and arms
// the timer for it otherwise.
func (p *progress) flush(ctx context.Context, now time.Time) {
	if p.pending == "" {
		return
	}
	if wait := p.every - now.Sub(p.last); !p.last.IsZero() && wait > 0 {
		if p.timer == nil {
			p.timer = time.NewTimer(wait)
		}
		return
	}
	p.n++
	p.send(ctx, p.n, p.pending)
	p.pending, p.last = "", now
}

// due receives when pending progress may be sent; nil when none waits.
func (p *progress) due() <-chan time.Time {
	if p.timer == nil {
		return nil
	}
	return p.timer.C
}

// fired notes that the timer of due fired.
func (p *progress) fired() { p.timer = nil }

// stop releases the timer.
func (p *progress) stop() {
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
}

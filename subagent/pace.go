package subagent

import (
	"sync"
	"time"
)

// pacer holds back the status messages of a task at work that come faster than one per
// interval: an agent may send `working` updates as fast as it can (10,000 of them were
// 10,000 text events), and a status that the next replaces before anyone could read it
// is worth nothing. The first goes out at once; those that follow within the interval
// replace each other (the latest wins) and the one held goes out when the interval is
// over, before any other text of the task (an artifact, a message, a status that is not
// at work) and before the delegation returns, so the last status before the task's end
// is never lost and text keeps its order.
//
// mu serialises the delegation's transcript between the goroutine that reads the task
// and the timer that releases a held status: the delegation holds it while it applies an
// event.
type pacer struct {
	interval time.Duration // zero or less: every status goes out
	tr       *transcript

	mu        sync.Mutex
	last      time.Time // when the last status went out
	held      bool
	key, text string // the status held back
	timer     *time.Timer
	armed     bool
	stopped   bool
}

func newPacer(interval time.Duration, tr *transcript) *pacer {
	return &pacer{interval: interval, tr: tr}
}

// status reports the text of a status message of a task at work, or holds it back. The
// caller holds mu.
func (p *pacer) status(key, text string) {
	if p.interval <= 0 || p.tr.silent || p.stopped {
		p.release()
		p.tr.set(key, text)
		return
	}
	now := time.Now()
	if !p.armed && now.Sub(p.last) >= p.interval {
		p.held = false
		p.last = now
		p.tr.set(key, text)
		return
	}
	p.key, p.text, p.held = key, text, true
	if p.armed {
		return
	}
	p.armed = true
	wait := p.last.Add(p.interval).Sub(now)
	if p.timer == nil {
		p.timer = time.AfterFunc(wait, p.fire)
	} else {
		p.timer.Reset(wait)
	}
}

// release reports the status held back, if any, now. The caller holds mu; every other
// report of the task's text calls it first.
func (p *pacer) release() {
	if !p.held {
		return
	}
	p.held = false
	p.last = time.Now()
	key, text := p.key, p.text
	p.key, p.text = "", ""
	p.tr.set(key, text)
}

// fire releases the status held back once the interval since the last one is over.
func (p *pacer) fire() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = false
	if !p.stopped {
		p.release()
	}
}

// stop releases what is held back and ends the timer: nothing is reported after the
// delegation returns.
func (p *pacer) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.release()
	p.stopped = true
	if p.timer != nil {
		p.timer.Stop()
	}
	p.armed = false
}

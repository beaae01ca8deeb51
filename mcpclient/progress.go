package mcpclient

import (
	"fmt"
	"slices"
	"sync"
)

// progressRouter maps progress tokens to the callbacks of their calls.
// Finished calls stay routable for a while (the last keepFinished), because
// go-sdk delivers notifications asynchronously and the last ones can arrive
// after the result.
type progressRouter struct {
	mu       sync.Mutex
	seq      uint64
	live     map[string]func(Progress)
	finished []string
}

const keepFinished = 256

func (p *progressRouter) register(fn func(Progress)) string {
	if fn == nil {
		return ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq++
	tok := fmt.Sprintf("baton-%d", p.seq)
	p.live[tok] = fn
	return tok
}

func (p *progressRouter) finish(tok string) {
	if tok == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.finished = append(p.finished, tok)
	if len(p.finished) > keepFinished {
		delete(p.live, p.finished[0])
		p.finished = slices.Delete(p.finished, 0, 1)
	}
}

func (p *progressRouter) deliver(tok any, pr Progress) {
	key, ok := tok.(string)
	if !ok {
		key = fmt.Sprint(tok)
	}
	p.mu.Lock()
	fn := p.live[key]
	p.mu.Unlock()
	if fn != nil {
		fn(pr)
	}
}

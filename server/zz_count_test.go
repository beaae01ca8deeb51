package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/baton-dev/baton/internal/testutil/benchagent"
	"github.com/baton-dev/baton/internal/testutil/pgtest"
		"github.com/baton-dev/baton/store"
)

type countStore struct {
	store.Store
	mu sync.Mutex
	n  map[string]int
	trace bool
	log []string
	ev map[string]int
}

func (c *countStore) inc(k string) { c.mu.Lock(); c.n[k]++; if c.trace { c.log = append(c.log, k) }; c.mu.Unlock() }
func (c *countStore) AppendEvents(ctx context.Context, t, r string, e int64, evs []store.Event) error {
	c.mu.Lock()
	var ts []string
	for _, ev := range evs {
		var h struct{ Type string }
		_ = json.Unmarshal(ev.Data, &h)
		c.ev[h.Type]++
		ts = append(ts, h.Type)
	}
	c.mu.Unlock()
	c.inc("AppendEvents " + strings.Join(ts, ","))
	return c.Store.AppendEvents(ctx, t, r, e, evs)
}
func (c *countStore) SaveRunWork(ctx context.Context, t, r string, e int64, wk json.RawMessage) error {
	var w struct{ Checkpoint json.RawMessage; A2A []any; MCP []any; Results map[string]any }
	_ = json.Unmarshal(wk, &w)
	var cp struct{ Conv json.RawMessage }
	_ = json.Unmarshal(w.Checkpoint, &cp)
	c.inc(fmt.Sprintf("SaveRunWork cp=%d conv=%d a2a=%d res=%d", len(w.Checkpoint), len(cp.Conv), len(w.A2A), len(w.Results)))
	return c.Store.SaveRunWork(ctx, t, r, e, wk)
}
func (c *countStore) RecordStep(ctx context.Context, s *store.Step) error {
	c.inc("RecordStep:" + s.Kind + ":" + s.Outcome)
	return c.Store.RecordStep(ctx, s)
}
func (c *countStore) SaveRunLog(ctx context.Context, t, r string, e int64, evs []store.Event, wk json.RawMessage) error {
	c.mu.Lock()
	var ts []string
	for _, ev := range evs {
		var h struct{ Type string }
		_ = json.Unmarshal(ev.Data, &h)
		c.ev[h.Type]++
		ts = append(ts, h.Type)
	}
	c.mu.Unlock()
	c.inc(fmt.Sprintf("SaveRunLog work=%d ", len(wk)) + strings.Join(ts, ","))
	return c.Store.SaveRunLog(ctx, t, r, e, evs, wk)
}
func (c *countStore) EndStep(ctx context.Context, th string, seq int64, end store.StepEnd) error {
	c.inc("EndStep")
	return c.Store.EndStep(ctx, th, seq, end)
}
func (c *countStore) StartRun(ctx context.Context, rs store.RunStart) (int64, error) {
	c.inc("StartRun")
	return c.Store.StartRun(ctx, rs)
}
func (c *countStore) EndRun(ctx context.Context, t, r string, e int64, s string) error {
	c.inc("EndRun")
	return c.Store.EndRun(ctx, t, r, e, s)
}
func (c *countStore) SaveMessages(ctx context.Context, t string, m []store.Message) error {
	c.inc("SaveMessages")
	return c.Store.SaveMessages(ctx, t, m)
}
func (c *countStore) LoadMessages(ctx context.Context, t string) ([]store.Message, error) {
	c.inc("LoadMessages")
	return c.Store.LoadMessages(ctx, t)
}
func (c *countStore) LoadSuspension(ctx context.Context, t string) (*store.Suspension, error) {
	c.inc("LoadSuspension")
	return c.Store.LoadSuspension(ctx, t)
}
func (c *countStore) ExpiredThread(ctx context.Context, t string) (string, bool, error) {
	c.inc("ExpiredThread")
	return c.Store.ExpiredThread(ctx, t)
}
func (c *countStore) GetThread(ctx context.Context, t string) (*store.Thread, error) {
	c.inc("GetThread")
	return c.Store.GetThread(ctx, t)
}

func TestZZCount(t *testing.T) {
	sq, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "b.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer sq.Close()
	cs := &countStore{Store: sq, n: map[string]int{}, ev: map[string]int{}}
	sat := httptest.NewServer(nil)
	defer sat.Close()
	sat.Config.Handler = benchagent.New(sat.URL, benchagent.Options{Chunks: []string{"one ", "two ", "three"}})
	base, stop := storesEngine(t, cs, sat.URL)
	const runs = 100
	for i := range runs {
		cs.mu.Lock(); cs.trace = i == runs-1; cs.mu.Unlock()
		resp, err := http.Post(base+"/agui", "application/json", strings.NewReader(fmt.Sprintf(`{"threadId":"c-%d","runId":"r","protocolVersion":"1.0","messages":[{"id":"u","role":"user","content":"go"}]}`, i)))
		if err != nil {
			t.Fatal(err)
		}
		readRun(t, resp.Body)
		resp.Body.Close()
	}
	stop()
	for _, l := range cs.log { t.Log("TRACE ", l) }
	var ks []string
	tot := 0
	for k, v := range cs.n {
		ks = append(ks, k)
		tot += v
	}
	sort.Strings(ks)
	agg := map[string]int{}
	for _, k := range ks {
		agg[strings.Fields(k)[0]] += cs.n[k]
	}
	for k, v := range agg {
		t.Logf("SUM %-40s %.2f", k, float64(v)/runs)
	}
	t.Logf("total %.2f", float64(tot)/runs)
	for k, v := range cs.ev {
		t.Logf("ev %-30s %.2f", k, float64(v)/runs)
	}
}


func printHist() {
	var tot, jobs int64
	for i := range store.BatchHist {
		n := store.BatchHist[i].Load()
		tot += n
		jobs += n * int64(i)
	}
	fmt.Printf("batches %d jobs %d single %d\n", tot, jobs, store.BatchHist[1].Load())
	pgtest.Stop()
}

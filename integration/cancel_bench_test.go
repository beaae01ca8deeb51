package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkDisconnectToCancel measures DESIGN §13's "disconnect → the sub-agent sees
// CancelTask": from the moment the AG-UI client cancels its request context to the arrival of
// the CancelTask request at the sub-agent's HTTP handler. Each iteration is one run on the
// in-process coordinator (engine + HTTP surface on loopback, the real openai provider against
// the fake model) delegating to the demo agent's slow task; the client drops the stream once
// the sub-agent's text streams (so the task id is known), and the next run starts only after
// the run has ended. p50 and p99 are reported in milliseconds (target: p99 < 25 ms).
//
//	go test -run XXX -bench DisconnectToCancel -benchtime 200x ./integration/
func BenchmarkDisconnectToCancel(b *testing.B) {
	ib := startInProcess(b, inprocOptions{})
	arrivals := make(chan time.Time, 16)
	ib.OnCancelTask(func(_ string, at time.Time) { arrivals <- at })
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		for len(arrivals) > 0 {
			<-arrivals
		}
		d, err := disconnectOnce(client, ib.URL, fmt.Sprintf("research: slow bench %d", i), arrivals)
		if err != nil {
			b.Fatalf("run %d: %v", i, err)
		}
		lat = append(lat, d)
		ib.waitIdle(b)
	}
	b.StopTimer()

	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(percentile(lat, 50)), "p50-ms")
	b.ReportMetric(ms(percentile(lat, 99)), "p99-ms")
	b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
}

// disconnectOnce starts one run, reads its stream until the sub-agent's first text, drops
// the stream and returns the time until the next CancelTask arrival.
func disconnectOnce(client *http.Client, base, text string, arrivals <-chan time.Time) (time.Duration, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	body, _ := json.Marshal(runInput(newThreadID("bench"), newThreadID("run"), text))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/agui", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("POST /agui: HTTP %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	streaming := false
	for !streaming && sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return 0, fmt.Errorf("bad SSE frame %q: %w", data, err)
		}
		switch ev["type"] {
		case "TEXT_MESSAGE_CONTENT":
			_, streaming = ev["subagentRunId"]
		case "RUN_FINISHED", "RUN_ERROR":
			return 0, fmt.Errorf("the run ended before the sub-agent streamed: %v", ev)
		}
	}
	if !streaming {
		return 0, fmt.Errorf("the stream ended before the sub-agent streamed: %v", sc.Err())
	}
	start := time.Now()
	cancel()
	select {
	case at := <-arrivals:
		return at.Sub(start), nil
	case <-time.After(10 * time.Second):
		return 0, fmt.Errorf("no CancelTask reached the agent within 10s of the disconnect")
	}
}

// percentile returns the nearest-rank p-th percentile of sorted durations.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 * n)
	return sorted[max(rank, 1)-1]
}

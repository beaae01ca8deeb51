// Command openruns is the load side of BenchmarkOpenRunsRealAgents (integration/
// sse_transport_bench_test.go): it opens AG-UI runs on a Baton and holds them, in a process
// of its own so that the benchmark's process holds Baton alone. With -agent it also serves
// an a2a-go agent (internal/demoagent's research agent, whose "slow" task streams its first
// step and then waits an hour).
//
// It prints "ready <agent URL or ->", then answers commands on stdin, one line each:
//
//	open <baton URL> <n> <prompt> <marker>  → open <opened> <first-event p50 ms> <p99 ms>
//	disconnect                              → disconnected
//	quit
//
// A run counts as open once its AG-UI stream has carried marker (text of the agent's).
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/baton-dev/baton/internal/demoagent"
)

func main() {
	agent := flag.Bool("agent", false, "also serve the a2a-go agent")
	flag.Parse()
	raiseFDLimit()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	url := "-"
	var done <-chan error
	if *agent {
		var err error
		url, done, err = demoagent.Start(ctx, "127.0.0.1:0", demoagent.Options{Kind: "research", SlowStep: time.Hour})
		if err != nil {
			fmt.Fprintln(os.Stderr, "openruns:", err)
			os.Exit(1)
		}
	}
	fmt.Println("ready", url)
	serve(bufio.NewScanner(os.Stdin))
	stop()
	if done != nil {
		<-done
	}
}

// raiseFDLimit raises the soft open-file limit to the hard one: each run is a connection.
func raiseFDLimit() {
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		lim.Cur = lim.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
}

func serve(in *bufio.Scanner) {
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	var cancels []context.CancelFunc
	var wg sync.WaitGroup
	defer wg.Wait()
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) > 5 { // the marker may hold spaces
			f = strings.SplitN(in.Text(), " ", 5)
		}
		switch {
		case len(f) == 5 && f[0] == "open":
			n, _ := strconv.Atoi(f[2])
			opened, p50, p99 := open(client, f[1], n, f[3], f[4], &cancels, &wg)
			fmt.Printf("open %d %.3f %.3f\n", opened, p50, p99)
		case len(f) == 1 && f[0] == "disconnect":
			for _, c := range cancels {
				c()
			}
			cancels = nil
			fmt.Println("disconnected")
		case len(f) == 1 && f[0] == "quit":
			for _, c := range cancels {
				c()
			}
			return
		}
	}
}

// open starts n runs at 1,000 a second, each asking prompt, and waits until each has shown
// marker or ended. It returns how many showed it and the p50 and p99 time to RUN_STARTED.
func open(client *http.Client, base string, n int, prompt, marker string, cancels *[]context.CancelFunc, wg *sync.WaitGroup) (int, float64, float64) {
	lat := make([]time.Duration, n)
	opened := make(chan bool, n)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for i := range n {
		<-tick.C
		ctx, cancel := context.WithCancel(context.Background())
		*cancels = append(*cancels, cancel)
		wg.Go(func() {
			ok := false
			defer func() {
				if !ok {
					opened <- false
				}
			}()
			body := fmt.Sprintf(`{"threadId":"open-%d-%d","runId":"r","protocolVersion":"1.0","messages":[{"id":"u","role":"user","content":%q}]}`, time.Now().UnixNano(), i, prompt)
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/agui", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			start := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			br := bufio.NewReaderSize(resp.Body, 4096)
			started := false
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					return
				}
				if !started && strings.Contains(line, `"RUN_STARTED"`) {
					lat[i] = time.Since(start)
					started = true
				}
				if !ok && strings.Contains(line, marker) {
					ok = true
					opened <- true
				}
			}
		})
	}
	got := 0
	for range n {
		if <-opened {
			got++
		}
	}
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(float64(n-1)*p)].Microseconds()) / 1000 }
	return got, pct(0.5), pct(0.99)
}

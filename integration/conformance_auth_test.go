package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// conformanceSuites are the installed versions of @modelcontextprotocol/conformance whose
// client auth scenarios TestConformanceAuth runs, newest first: the newest published one (an
// npm alias in integration/peers/package.json) and the pinned release. A scenario that a
// newer suite lists runs there only: on this pair, for each of the 21 scenarios both list,
// the newer suite's checks were those of the pinned one and more (the resource-parameter and
// application-type checks), and every scenario is a Node process of about 1.4 CPU-seconds
// (55 processes took 70 CPU-s of a 2-core make test; 34 now). The pinned suite still runs
// the scenarios only it has.
var conformanceSuites = []struct {
	name string // for subtest names
	pkg  string // directory under node_modules
}{
	{"0.2.0-alpha.12", "conformance-next"},
	{"0.1.16", "@modelcontextprotocol/conformance"},
}

// knownAuthFailures lists, per suite version, every auth scenario that Baton does not pass,
// with the reason. The table is exact: a listed scenario that passes fails the test (so that
// the table, and the issue note built from it, stays true), and so does a scenario not listed
// that fails.
var knownAuthFailures = map[string]map[string]string{
	"0.1.16":         {},
	"0.2.0-alpha.12": {},
}

var authOverallRE = regexp.MustCompile(`OVERALL: (PASSED|FAILED)`)

var conformanceClientOnce struct {
	sync.Once
	bin string
	err error
}

// conformanceClientBin builds cmd/mcp-conformance-client once per test binary.
func conformanceClientBin(t *testing.T) string {
	t.Helper()
	root := repoRoot(t)
	buildBinaries(t) // creates binDir, which TestMain removes
	conformanceClientOnce.Do(func() {
		bin := filepath.Join(binDir, "mcp-conformance-client")
		cmd := exec.Command("go", "build", "-o", bin, "./cmd/mcp-conformance-client")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			conformanceClientOnce.err = fmt.Errorf("go build ./cmd/mcp-conformance-client: %w\n%s", err, out)
			return
		}
		conformanceClientOnce.bin = bin
	})
	if conformanceClientOnce.err != nil {
		t.Fatal(conformanceClientOnce.err)
	}
	return conformanceClientOnce.bin
}

// TestConformanceAuth runs every auth/* client scenario of the conformance suite versions
// (each in the newest suite that lists it) against cmd/mcp-conformance-client (signin.Handler with signin.Memory, and the
// client_credentials handler) and checks each outcome against knownAuthFailures.
func TestConformanceAuth(t *testing.T) {
	t.Parallel()
	node := requireNode22(t)
	peers := requirePeers(t)
	bin := conformanceClientBin(t)

	type result struct {
		suite, scenario string
		passed          bool
		detail          string
	}
	var jobs []struct{ suite, pkg, scenario string }
	ranIn := map[string]string{} // scenario → the suite that runs it
	for _, s := range conformanceSuites {
		index := filepath.Join(peers, "node_modules", s.pkg, "dist", "index.js")
		if _, err := os.Stat(index); err != nil {
			skipOrFail(t, fmt.Sprintf("conformance suite %s is not installed at %s: run `make peers`", s.name, index))
		}
		out, err := exec.Command(node, index, "list", "--client").CombinedOutput()
		if err != nil {
			t.Fatalf("%s list --client: %v\n%s", s.name, err, out)
		}
		scenarios := regexp.MustCompile(`(?m)^\s*-\s*(auth/[a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1)
		if len(scenarios) == 0 {
			t.Fatalf("%s lists no auth scenarios:\n%s", s.name, out)
		}
		runs := map[string]bool{}
		for _, m := range scenarios {
			if ranIn[m[1]] != "" {
				continue // a newer suite runs it
			}
			ranIn[m[1]], runs[m[1]] = s.name, true
			jobs = append(jobs, struct{ suite, pkg, scenario string }{s.name, s.pkg, m[1]})
		}
		for sc := range knownAuthFailures[s.name] {
			if !runs[sc] {
				t.Errorf("%s: known failure %s is not a scenario this suite runs: remove it from the table", s.name, sc)
			}
		}
	}

	// Each scenario is a node process with its own servers on ephemeral ports; a few at a
	// time keep the machine responsive (most of a scenario's time is waiting, not CPU).
	results := make([]result, len(jobs))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i] = result{suite: j.suite, scenario: j.scenario}
			results[i].passed, results[i].detail = runAuthScenario(t, node, peers, j.pkg, bin, j.scenario)
		}()
	}
	wg.Wait()

	sort.SliceStable(results, func(a, b int) bool { return results[a].suite < results[b].suite })
	summary := map[string][2]int{}
	for _, r := range results {
		t.Run(r.suite+"/"+r.scenario, func(t *testing.T) {
			reason, known := knownAuthFailures[r.suite][r.scenario]
			c := summary[r.suite]
			if r.passed {
				c[0]++
			} else {
				c[1]++
			}
			summary[r.suite] = c
			switch {
			case r.passed && known:
				t.Errorf("passes now, but is listed as a known failure (%s): remove it from knownAuthFailures", reason)
			case !r.passed && !known:
				t.Errorf("failed:\n%s", r.detail)
			case !r.passed:
				t.Logf("known failure: %s", reason)
			}
		})
	}
	for _, s := range conformanceSuites {
		t.Logf("conformance %s: %d auth scenarios pass, %d fail (known: %d)", s.name, summary[s.name][0], summary[s.name][1], len(knownAuthFailures[s.name]))
	}
}

// runAuthScenario runs one scenario and reports whether the suite passed it: OVERALL PASSED
// and no check in FAILURE or WARNING.
func runAuthScenario(t *testing.T, node, peers, pkg, bin, scenario string) (bool, string) {
	results, err := os.MkdirTemp("", "baton-conformance-results-")
	if err != nil {
		return false, err.Error()
	}
	defer os.RemoveAll(results)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(peers, "node_modules", pkg, "dist", "index.js"),
		"client", "--command", bin, "--scenario", scenario, "-o", results)
	cmd.Dir = peers
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	out, _ := cmd.CombinedOutput()
	m := authOverallRE.FindStringSubmatch(string(out))
	if m == nil {
		return false, "no OVERALL line:\n" + authTail(string(out), 3000)
	}
	var files []string
	_ = filepath.WalkDir(results, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == "checks.json" {
			files = append(files, p)
		}
		return nil
	})
	if len(files) == 0 {
		return false, "no checks.json:\n" + authTail(string(out), 3000)
	}
	var bad []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return false, err.Error()
		}
		var checks []struct {
			ID, Status, ErrorMessage string
		}
		if err := json.Unmarshal(b, &checks); err != nil {
			return false, fmt.Sprintf("%s: %v", f, err)
		}
		for _, c := range checks {
			if c.Status == "FAILURE" || c.Status == "WARNING" {
				bad = append(bad, c.ID+" "+c.Status+": "+c.ErrorMessage)
			}
		}
	}
	slices.Sort(bad)
	if m[1] != "PASSED" || len(bad) > 0 {
		return false, strings.Join(bad, "\n") + "\n" + authTail(string(out), 3000)
	}
	return true, ""
}

func authTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

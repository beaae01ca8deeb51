// Package browsertest starts a headless Chromium for tests of the chat page, driven from Go
// with chromedp.
//
// The browser is Debian's chromium (or the binary named by BATON_CHROMIUM), started with a
// fresh profile and the flags that keep it off the network except for the page under test.
// When no browser is installed the test is skipped with a printed reason, except when CI is
// set, where that is a failure (DESIGN §12). The browser's uncaught exceptions and security
// messages (a Content-Security-Policy violation, say) are collected, so that a test can
// assert that the page ran cleanly.
package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
)

// candidates are the browser binaries tried, in order, after $BATON_CHROMIUM.
var candidates = []string{"chromium", "chromium-browser", "google-chrome-stable", "google-chrome"}

// ExecPath returns the browser binary: $BATON_CHROMIUM, or the first of chromium,
// chromium-browser, google-chrome-stable and google-chrome on PATH.
func ExecPath() (string, error) {
	if p := os.Getenv("BATON_CHROMIUM"); p != "" {
		return exec.LookPath(p)
	}
	for _, name := range candidates {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no Chromium found (tried $BATON_CHROMIUM and %s); install Debian's chromium: apt-get install -y --no-install-recommends chromium",
		strings.Join(candidates, ", "))
}

// Options configures Start.
type Options struct {
	// Width and Height are the window size; default 1280×900.
	Width, Height int
}

// Browser is one headless browser with one tab.
type Browser struct {
	// Ctx is the chromedp context of the tab; pass it to chromedp.Do and chromedp.Run.
	Ctx context.Context

	mu       sync.Mutex
	problems []string
}

// Start launches the browser for t and stops it in t.Cleanup. Without a browser the test
// is skipped, or fails when CI is set.
func Start(t testing.TB, opts Options) *Browser {
	t.Helper()
	path, err := ExecPath()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%v (CI is set, so this is a failure, not a skip)", err)
		}
		t.Skip(err.Error())
	}
	if opts.Width <= 0 || opts.Height <= 0 {
		opts.Width, opts.Height = 1280, 900
	}
	profile, err := os.MkdirTemp("", "baton-chromium-")
	if err != nil {
		t.Fatalf("browser profile: %v", err)
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox, // root in containers and CI
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("password-store", "basic"),
		chromedp.UserDataDir(profile),
		// Chromium keeps its singleton socket in a directory of its own under TMPDIR, which
		// a killed browser leaves behind: put it in the profile, which is removed.
		chromedp.Env("TMPDIR="+profile),
		chromedp.WindowSize(opts.Width, opts.Height),
	)
	ctx, cancel := chromedp.NewContext(allocCtx)
	b := &Browser{Ctx: ctx}
	// Start the browser now, so that a broken install fails here with a clear message.
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		cancelAlloc()
		_ = os.RemoveAll(profile)
		t.Fatalf("starting %s: %v", path, err)
	}
	messages := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() || m.Source == "security" {
				b.mu.Lock()
				b.problems = append(b.problems, m.String())
				b.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		cancelAlloc() // waits for the browser process to exit
		<-done
		_ = os.RemoveAll(profile)
	})
	return b
}

// Problems returns the uncaught exceptions and security messages of the page so far.
func (b *Browser) Problems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.problems...)
}

// Screenshot saves a full-page PNG at path (creating its directory), logs the path and
// returns it.
func (b *Browser) Screenshot(t testing.TB, path string) string {
	t.Helper()
	png, err := chromedp.Run(b.Ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Errorf("screenshot %s: %v", path, err)
		return ""
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Errorf("screenshot %s: %v", path, err)
		return ""
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Errorf("screenshot %s: %v", path, err)
		return ""
	}
	t.Logf("screenshot: %s", path)
	return path
}

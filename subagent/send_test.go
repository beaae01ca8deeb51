package subagent

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/baton-dev/baton/internal/testutil"
)

// leakCheck registers a goroutine leak check that runs after every other cleanup of t
// (servers closed, agents closed).
func leakCheck(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
}

// testOptions keeps waits short: no timed assertion depends on them.
func testOptions() Options {
	return Options{Logger: quietLogger(), PollInterval: 10 * time.Millisecond, RetryBackoff: time.Millisecond}
}

// continuationOptions are testOptions for tests that answer a parked task: the a2a-go
// server answers "task execution is already in progress" while the parked execution
// winds down, and under load a 1 ms backoff can spend every retry inside that window.
func continuationOptions() Options {
	opts := testOptions()
	opts.RetryBackoff = 100 * time.Millisecond
	return opts
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func resolve(t *testing.T, p *testPeer, protocol string) *Agent {
	t.Helper()
	return resolveWith(t, p, protocol, testOptions())
}

func resolveWith(t *testing.T, p *testPeer, protocol string, opts Options) *Agent {
	t.Helper()
	a, err := Resolve(testCtx(t), AgentConfig{Name: "peer", URL: p.URL, Protocol: protocol}, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })
	return a
}

// recorder records what an Observer receives.
type recorder struct {
	mu     sync.Mutex
	tasks  []string
	texts  []string
	states []State
	taskCh chan string
}

func newRecorder() *recorder { return &recorder{taskCh: make(chan string, 1)} }

func (r *recorder) observer() Observer {
	return Observer{
		Task: func(taskID, contextID string) {
			r.mu.Lock()
			r.tasks = append(r.tasks, taskID)
			r.mu.Unlock()
			select {
			case r.taskCh <- taskID:
			default:
			}
		},
		Text: func(delta string) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.texts = append(r.texts, delta)
		},
		State: func(s State) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.states = append(r.states, s)
		},
	}
}

func (r *recorder) text() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.texts, "")
}

func (r *recorder) stateList() []State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]State(nil), r.states...)
}

type variant struct {
	name      string
	card      cardKind
	force     string
	streaming bool
	wantProto string
}

var variants = []variant{
	{"1.0/stream", cardDual, "", true, Protocol10},
	{"1.0/blocking", cardDual, "", false, Protocol10},
	{"1.0-only-card/stream", cardV10Only, "", true, Protocol10},
	{"0.3-forced/stream", cardDual, Protocol03, true, Protocol03},
	{"0.3-forced/blocking", cardDual, Protocol03, false, Protocol03},
	{"0.3-only-card/stream", cardV03Only, "", true, Protocol03},
	{"0.3-legacy-card/blocking", cardLegacy, "", false, Protocol03},
	{"0.3-legacy-card/stream", cardLegacy, "", true, Protocol03},
}

func TestResolve(t *testing.T) {
	leakCheck(t)
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			p := startPeer(t, peerOptions{card: v.card, streaming: v.streaming})
			a := resolve(t, p, v.force)
			assert.Equal(t, v.wantProto, a.ProtocolVersion)
			assert.Equal(t, v.streaming, a.Streaming)
			assert.Equal(t, "peer", a.Name)
			assert.Equal(t, "peer", a.Card().Name)
			assert.NotEmpty(t, a.Description)
			require.Len(t, a.Skills, 1)
			assert.Equal(t, "script", a.Skills[0].Name)
			assert.Equal(t, "first word picks the outcome", a.Skills[0].Description)
			wantPath := "/a2a"
			if v.wantProto == Protocol03 {
				wantPath = "/a2a/v0"
			}
			assert.Equal(t, p.URL+wantPath, a.Endpoint())
		})
	}
	t.Run("1.0 forced on a 0.3-only card", func(t *testing.T) {
		p := startPeer(t, peerOptions{card: cardV03Only, streaming: true})
		_, err := Resolve(testCtx(t), AgentConfig{Name: "peer", URL: p.URL, Protocol: Protocol10}, testOptions())
		require.ErrorIs(t, err, ErrCapabilityGap)
	})
	t.Run("no URL", func(t *testing.T) {
		_, err := Resolve(testCtx(t), AgentConfig{Name: "peer"}, testOptions())
		require.Error(t, err)
	})
	t.Run("unknown protocol", func(t *testing.T) {
		_, err := Resolve(testCtx(t), AgentConfig{Name: "peer", URL: "http://127.0.0.1:1", Protocol: "2.0"}, testOptions())
		require.Error(t, err)
	})
	t.Run("unreachable", func(t *testing.T) {
		_, err := Resolve(testCtx(t), AgentConfig{Name: "peer", URL: deadURL(t)}, testOptions())
		require.ErrorIs(t, err, ErrUnreachable)
	})
	t.Run("card only with a version header", func(t *testing.T) {
		// @a2a-js/sdk answers a header-less card request with an error when it has no 0.3
		// interface, and with the 1.0 card when asked for 1.0.
		for _, status := range []int{http.StatusOK, http.StatusBadRequest} {
			p := startPeer(t, peerOptions{card: cardV10Only, streaming: true, cardNeedsVersion: status})
			a := resolve(t, p, "")
			assert.Equal(t, Protocol10, a.ProtocolVersion)
			res, err := a.Send(testCtx(t), Request{Prompt: "complete"}, Observer{})
			require.NoError(t, err)
			assert.Equal(t, StateCompleted, res.State)
		}
	})
	t.Run("no card", func(t *testing.T) {
		p := startPeer(t, peerOptions{card: cardDual})
		_, err := Resolve(testCtx(t), AgentConfig{Name: "peer", URL: p.URL + "/nowhere"}, testOptions())
		require.ErrorIs(t, err, ErrUnreachable)
	})
}

// deadURL returns the URL of a port nothing listens on.
func deadURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return "http://" + addr
}

// scenario is one scripted outcome. text is the Result text; observed is what the Observer
// must have received in total.
type scenario struct {
	prompt   string
	state    State
	text     string
	observed string
}

var scenarios = []scenario{
	{"complete the job", StateCompleted, "chunk one chunk two chunk three\ndone", "thinking\nchunk one chunk two chunk three\ndone"},
	{"fail now", StateFailed, "scripted failure", "thinking\nscripted failure"},
	{"reject this", StateRejected, "scripted rejection", "thinking\nscripted rejection"},
	{"cancelself please", StateCanceled, "canceled by the agent", "thinking\ncanceled by the agent"},
	{"input please", StateInputRequired, "need more input: what colour?", "thinking\nneed more input: what colour?"},
	{"auth please", StateAuthRequired, "please authenticate", "thinking\nplease authenticate"},
	{"message hi", StateMessage, "echo: message hi", "echo: message hi"},
	{"data please", StateCompleted,
		"{\"answer\":42,\"q\":\"a<b\"}\n[file: report.pdf (application/pdf)]\n[file: https://example.com/chart.png (image/png)]\ntext after files",
		"thinking\n{\"answer\":42,\"q\":\"a<b\"}\n[file: report.pdf (application/pdf)]\n[file: https://example.com/chart.png (image/png)]\ntext after files"},
}

func TestSendStates(t *testing.T) {
	leakCheck(t)
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			p := startPeer(t, peerOptions{card: v.card, streaming: v.streaming})
			a := resolve(t, p, v.force)
			for _, sc := range scenarios {
				t.Run(sc.prompt, func(t *testing.T) {
					rec := newRecorder()
					res, err := a.Send(testCtx(t), Request{Prompt: sc.prompt}, rec.observer())
					require.NoError(t, err)
					assert.Equal(t, sc.state, res.State)
					assert.Equal(t, sc.text, res.Text)
					assert.Equal(t, sc.observed, rec.text())
					states := rec.stateList()
					require.NotEmpty(t, states)
					assert.Equal(t, sc.state, states[len(states)-1])
					if sc.state == StateMessage {
						assert.Empty(t, res.TaskID)
						assert.Empty(t, rec.tasks)
						return
					}
					require.NotEmpty(t, res.TaskID)
					assert.NotEmpty(t, res.ContextID)
					assert.Equal(t, []string{res.TaskID}, rec.tasks, "Observer.Task is called once")
					if v.streaming {
						assert.Contains(t, states, StateWorking)
					}
					if sc.state == StateAuthRequired {
						// Send returned while the agent still waits (the stream is open).
						got, err := a.GetTask(testCtx(t), res.TaskID)
						require.NoError(t, err)
						assert.Equal(t, StateAuthRequired, got.State)
					}
				})
			}
			// The transport follows the card: streaming sends only when it allows them.
			streamed := p.count(isStreamMethod)
			if v.streaming {
				assert.Positive(t, streamed)
			} else {
				assert.Zero(t, streamed)
			}
		})
	}
}

func TestSendStreamsArtifactChunks(t *testing.T) {
	leakCheck(t)
	for _, force := range []string{Protocol10, Protocol03} {
		t.Run(force, func(t *testing.T) {
			p := startPeer(t, peerOptions{card: cardDual, streaming: true})
			a := resolve(t, p, force)
			rec := newRecorder()
			_, err := a.Send(testCtx(t), Request{Prompt: "complete"}, rec.observer())
			require.NoError(t, err)
			assert.Equal(t, []string{"thinking", "\nchunk one ", "chunk two ", "chunk three", "\ndone"}, rec.texts)
			assert.Equal(t, []State{StateSubmitted, StateWorking, StateCompleted}, rec.stateList())
		})
	}
}

func TestSendContinuation(t *testing.T) {
	leakCheck(t)
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			p := startPeer(t, peerOptions{card: v.card, streaming: v.streaming})
			a := resolveWith(t, p, v.force, continuationOptions())
			for _, tc := range []struct {
				prompt, answer string
				parked         State
				text           string
			}{
				{"input", "blue", StateInputRequired, "got: blue\nthanks"},
				{"auth", "done", StateAuthRequired, "authenticated"}, // credentials came out of band: the task goes on by itself
			} {
				t.Run(tc.prompt, func(t *testing.T) {
					ctx := testCtx(t)
					first, err := a.Send(ctx, Request{Prompt: tc.prompt}, Observer{})
					require.NoError(t, err)
					require.Equal(t, tc.parked, first.State)

					rec := newRecorder()
					res, err := a.Send(ctx, Request{Prompt: tc.answer, TaskID: first.TaskID, ContextID: first.ContextID}, rec.observer())
					require.NoError(t, err)
					assert.Equal(t, StateCompleted, res.State)
					assert.Equal(t, first.TaskID, res.TaskID)
					assert.Equal(t, first.ContextID, res.ContextID)
					assert.Equal(t, tc.text, res.Text)
					assert.Equal(t, tc.text, rec.text(), "only the new text is observed")
					assert.Equal(t, []string{first.TaskID}, rec.tasks)

					// The task is over now: continuing it again is a bad transition.
					_, err = a.Send(ctx, Request{Prompt: "again", TaskID: first.TaskID, ContextID: first.ContextID}, Observer{})
					require.ErrorIs(t, err, ErrInvalidTransition)
					assert.Equal(t, first.TaskID, TaskIDOf(err))
					assert.Contains(t, err.Error(), first.TaskID)
				})
			}
			for _, failGets := range []int{0, 1} {
				if !v.streaming {
					continue
				}
				// The server streams the parked task first (still input-required, with the
				// old question): that is not the answer. With failGets the client could not
				// read the task beforehand and must recognise the replay by itself.
				t.Run(fmt.Sprintf("parked task replayed/failGets=%d", failGets), func(t *testing.T) {
					ctx := testCtx(t)
					first, err := a.Send(ctx, Request{Prompt: "input"}, Observer{})
					require.NoError(t, err)
					require.Equal(t, StateInputRequired, first.State)

					p.set(func(p *testPeer) { p.failGets = failGets })
					rec := newRecorder()
					res, err := a.Send(ctx, Request{Prompt: "replay blue", TaskID: first.TaskID, ContextID: first.ContextID}, rec.observer())
					require.NoError(t, err)
					assert.Equal(t, StateCompleted, res.State)
					assert.Equal(t, "got: replay blue\nthanks", res.Text)
					assert.Equal(t, res.Text, rec.text(), "the old question is not observed again")
					assert.NotContains(t, rec.stateList(), StateInputRequired)
				})
			}
			t.Run("unknown task", func(t *testing.T) {
				_, err := a.Send(testCtx(t), Request{Prompt: "hi", TaskID: "nope"}, Observer{})
				require.ErrorIs(t, err, ErrInvalidTransition)
				require.ErrorIs(t, err, sdk.ErrTaskNotFound)
			})
			t.Run("completed task", func(t *testing.T) {
				res, err := a.Send(testCtx(t), Request{Prompt: "complete"}, Observer{})
				require.NoError(t, err)
				_, err = a.Send(testCtx(t), Request{Prompt: "more", TaskID: res.TaskID, ContextID: res.ContextID}, Observer{})
				require.ErrorIs(t, err, ErrInvalidTransition)
			})
		})
	}
}

func TestSendResumesDroppedStream(t *testing.T) {
	leakCheck(t)
	for _, force := range []string{Protocol10, Protocol03} {
		for _, mode := range []struct {
			name            string
			abort           bool
			failResubscribe bool
		}{
			{"eof", false, false},
			{"abort", true, false},
			{"eof+poll", false, true},
			{"abort+poll", true, true},
		} {
			// cut returns an agent whose peer cuts the first stream after two frames.
			cut := func(t *testing.T) (*testPeer, *Agent) {
				p := startPeer(t, peerOptions{card: cardDual, streaming: true})
				p.set(func(p *testPeer) {
					p.cutStreams, p.cutAfter, p.cutAbort, p.failResubscribe = 1, 2, mode.abort, mode.failResubscribe
				})
				return p, resolve(t, p, force)
			}
			checkResume := func(t *testing.T, p *testPeer) {
				if mode.failResubscribe {
					assert.Equal(t, DefaultMaxResubscribe, p.count(isResubscribeMethod))
					assert.Positive(t, p.count(isGetMethod))
				} else {
					assert.Positive(t, p.count(isResubscribeMethod))
				}
			}
			t.Run(force+"/"+mode.name+"/artifact chunks", func(t *testing.T) {
				p, a := cut(t)
				rec := newRecorder()
				res, err := a.Send(testCtx(t), Request{Prompt: "drop"}, rec.observer())
				require.NoError(t, err)
				assert.Equal(t, StateCompleted, res.State)
				assert.Equal(t, "alpha beta gamma delta", res.Text)
				assert.Equal(t, res.Text, rec.text(), "every piece of text observed exactly once")
				require.NotEmpty(t, rec.texts)
				assert.Equal(t, "alpha ", rec.texts[0], "the first chunk came through the original stream")
				assert.Equal(t, []string{res.TaskID}, rec.tasks)
				checkResume(t, p)
			})
			t.Run(force+"/"+mode.name+"/messages and artifacts", func(t *testing.T) {
				p, a := cut(t)
				rec := newRecorder()
				res, err := a.Send(testCtx(t), Request{Prompt: "dropmsg"}, rec.observer())
				require.NoError(t, err)
				assert.Equal(t, StateCompleted, res.State)
				assert.Equal(t, "alpha beta\nsecond\ndone", res.Text)
				seen := rec.text()
				for _, piece := range []string{"alpha ", "beta", "second", "halfway", "almost", "done"} {
					assert.Equal(t, 1, strings.Count(seen, piece), "%q in %q", piece, seen)
				}
				checkResume(t, p)
			})
		}
	}
}

func TestSendRetries(t *testing.T) {
	leakCheck(t)
	for _, v := range []variant{variants[0], variants[1], variants[3], variants[4]} {
		t.Run(v.name, func(t *testing.T) {
			p := startPeer(t, peerOptions{card: v.card, streaming: v.streaming})
			a := resolve(t, p, v.force)

			t.Run("recovers", func(t *testing.T) {
				before := p.count(isSendMethod)
				p.set(func(p *testPeer) { p.failSends, p.retryAfter = 2, "0" })
				res, err := a.Send(testCtx(t), Request{Prompt: "complete"}, Observer{})
				require.NoError(t, err)
				assert.Equal(t, StateCompleted, res.State)
				assert.Equal(t, 3, p.count(isSendMethod)-before)
			})
			t.Run("gives up", func(t *testing.T) {
				before := p.count(isSendMethod)
				p.set(func(p *testPeer) { p.failSends, p.retryAfter = 5, "" })
				_, err := a.Send(testCtx(t), Request{Prompt: "complete"}, Observer{})
				require.ErrorIs(t, err, ErrUnreachable)
				assert.Equal(t, maxAttempts, p.count(isSendMethod)-before)
				p.set(func(p *testPeer) { p.failSends = 0 })
			})
			t.Run("long Retry-After is reported, not slept", func(t *testing.T) {
				before := p.count(isSendMethod)
				p.set(func(p *testPeer) { p.failSends, p.retryAfter = 1, "3600" })
				_, err := a.Send(testCtx(t), Request{Prompt: "complete"}, Observer{})
				require.ErrorIs(t, err, ErrUnreachable)
				assert.Equal(t, 1, p.count(isSendMethod)-before)
			})
		})
	}
}

func TestSendErrors(t *testing.T) {
	leakCheck(t)
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			p := startPeer(t, peerOptions{card: v.card, streaming: v.streaming})
			a := resolve(t, p, v.force)
			for _, tc := range []struct {
				prompt string
				want   []error
			}{
				{"unsupported", []error{ErrCapabilityGap, sdk.ErrUnsupportedOperation}},
				{"contenttype", []error{ErrCapabilityGap, sdk.ErrUnsupportedContentType}},
				{"denied", []error{ErrAuth, sdk.ErrUnauthenticated}},
			} {
				t.Run(tc.prompt, func(t *testing.T) {
					_, err := a.Send(testCtx(t), Request{Prompt: tc.prompt}, Observer{})
					for _, want := range tc.want {
						require.ErrorIs(t, err, want)
					}
				})
			}
			t.Run("protocol errors are unreachable, never a failed task", func(t *testing.T) {
				_, err := a.Send(testCtx(t), Request{Prompt: "broken"}, Observer{})
				require.ErrorIs(t, err, ErrUnreachable)
				for _, sentinel := range []error{ErrInvalidTransition, ErrAuth, ErrCapabilityGap} {
					assert.NotErrorIs(t, err, sentinel)
				}
			})
			t.Run("agent went away", func(t *testing.T) {
				p.srv.Close()
				_, err := a.Send(testCtx(t), Request{Prompt: "complete"}, Observer{})
				require.ErrorIs(t, err, ErrUnreachable)
			})
		})
	}
}

// TestSendContextDone: the caller's context ends while the task runs. Every variant learns
// the task id while the task runs, also an agent that does not stream (it is sent
// ReturnImmediately, blocking:false on the 0.3 wire, and followed), so that the caller can
// cancel the task with it.
func TestSendContextDone(t *testing.T) {
	leakCheck(t)
	for _, v := range []variant{variants[0], variants[1], variants[4], variants[6]} {
		t.Run(v.name, func(t *testing.T) {
			p := startPeer(t, peerOptions{card: v.card, streaming: v.streaming})
			opts := testOptions()
			opts.IDGrace = -1 // see TestSendLearnsTaskIDAfterContextDone
			a := resolveWith(t, p, v.force, opts)
			ctx, cancel := context.WithCancel(testCtx(t))
			rec := newRecorder()
			done := make(chan error, 1)
			go func() {
				_, err := a.Send(ctx, Request{Prompt: "slow"}, rec.observer())
				done <- err
			}()
			started := <-p.exec.started
			select {
			case id := <-rec.taskCh:
				assert.Equal(t, started, id, "the task is named before the work ends")
			case <-done:
				t.Fatal("Send returned before the caller's context ended")
			}
			cancel()
			err := <-done
			require.ErrorIs(t, err, context.Canceled)
			assert.Equal(t, started, TaskIDOf(err))
			// The server goes on without the client: the caller cancels the task.
			taskID := started
			waitStored(t, a, taskID)
			require.NoError(t, a.Cancel(testCtx(t), taskID))
			res, err := a.GetTask(testCtx(t), taskID)
			require.NoError(t, err)
			assert.Equal(t, StateCanceled, res.State)
		})
	}
}

func TestSendLearnsTaskIDAfterContextDone(t *testing.T) {
	leakCheck(t)
	// The caller's context ends before the agent has said anything: Send keeps the
	// request open (IDGrace) until the task id arrives, so that the caller can cancel it.
	for _, tc := range []struct {
		v      variant
		prompt string
	}{
		{variants[0], "late slow"},  // streaming: the first event names the task
		{variants[3], "late slow"},  // same over 0.3
		{variants[1], "late input"}, // blocking: the answer (a parked task) names it
		{variants[4], "late input"}, // same over 0.3
	} {
		t.Run(tc.v.name, func(t *testing.T) {
			p := startPeer(t, peerOptions{card: tc.v.card, streaming: tc.v.streaming})
			a := resolve(t, p, tc.v.force)
			ctx, cancel := context.WithCancel(testCtx(t))
			rec := newRecorder()
			done := make(chan error, 1)
			go func() {
				_, err := a.Send(ctx, Request{Prompt: tc.prompt}, rec.observer())
				done <- err
			}()
			for p.count(isSendMethod) == 0 { // the request is at the server
				require.NoError(t, sleep(testCtx(t), time.Millisecond))
			}
			cancel()
			p.exec.openLate()
			err := <-done
			require.ErrorIs(t, err, context.Canceled)
			taskID := TaskIDOf(err)
			require.NotEmpty(t, taskID, "the task id arrived within the grace")
			assert.Equal(t, []string{taskID}, rec.tasks)
			if strings.HasSuffix(tc.prompt, "slow") {
				assert.Equal(t, taskID, <-p.exec.started)
				waitStored(t, a, taskID)
			}
			require.NoError(t, a.Cancel(testCtx(t), taskID))
			got, err := a.GetTask(testCtx(t), taskID)
			require.NoError(t, err)
			assert.Equal(t, StateCanceled, got.State)
		})
	}
}

func TestCancel(t *testing.T) {
	leakCheck(t)
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			p := startPeer(t, peerOptions{card: v.card, streaming: v.streaming})
			a := resolve(t, p, v.force)

			t.Run("running task", func(t *testing.T) {
				rec := newRecorder()
				done := make(chan *Result, 1)
				errs := make(chan error, 1)
				go func() {
					res, err := a.Send(testCtx(t), Request{Prompt: "slow"}, rec.observer())
					errs <- err
					done <- res
				}()
				taskID := <-p.exec.started
				if v.streaming {
					assert.Equal(t, taskID, <-rec.taskCh)
				}
				waitStored(t, a, taskID)
				terminal, err := a.CancelConfirm(testCtx(t), taskID)
				require.NoError(t, err)
				assert.False(t, terminal, "canceled by this call, not already over")
				require.NoError(t, <-errs)
				res := <-done
				assert.Equal(t, StateCanceled, res.State)
				assert.Equal(t, taskID, res.TaskID)
				assert.Equal(t, "canceled on request", res.Text)

				got, err := a.GetTask(testCtx(t), taskID)
				require.NoError(t, err)
				assert.Equal(t, StateCanceled, got.State)
			})
			t.Run("completed task", func(t *testing.T) {
				res, err := a.Send(testCtx(t), Request{Prompt: "complete"}, Observer{})
				require.NoError(t, err)
				terminal, err := a.CancelConfirm(testCtx(t), res.TaskID)
				require.NoError(t, err)
				assert.True(t, terminal, "a completed task was already over")
				got, err := a.GetTask(testCtx(t), res.TaskID)
				require.NoError(t, err)
				assert.Equal(t, StateCompleted, got.State)
				assert.Equal(t, res.Text, got.Text)
			})
			t.Run("parked task", func(t *testing.T) {
				res, err := a.Send(testCtx(t), Request{Prompt: "input"}, Observer{})
				require.NoError(t, err)
				terminal, err := a.CancelConfirm(testCtx(t), res.TaskID)
				require.NoError(t, err)
				assert.False(t, terminal, "a parked task is canceled, not already over")
				got, err := a.GetTask(testCtx(t), res.TaskID)
				require.NoError(t, err)
				assert.Equal(t, StateCanceled, got.State)
			})
			t.Run("unknown task", func(t *testing.T) {
				err := a.Cancel(testCtx(t), "nope")
				require.Error(t, err)
				_, err = a.GetTask(testCtx(t), "nope")
				require.ErrorIs(t, err, sdk.ErrTaskNotFound)
			})
		})
	}
}

// waitStored waits until the server has stored a task its executor started (the executor
// runs ahead of the server's bookkeeping).
func waitStored(t *testing.T, a *Agent, taskID string) {
	t.Helper()
	ctx := testCtx(t)
	for {
		res, err := a.GetTask(ctx, taskID)
		if err == nil && res.State == StateWorking {
			return
		}
		require.NoError(t, sleep(ctx, 2*time.Millisecond), "task %s never stored as working", taskID)
	}
}

func TestMain(m *testing.M) {
	// The SDK logs server-side trouble (the cut streams) through slog.Default.
	slog.SetDefault(quietLogger())
	testutil.VerifyTestMain(m)
}

func TestStateMethods(t *testing.T) {
	terminal := []State{StateCompleted, StateFailed, StateRejected, StateCanceled, StateMessage}
	interrupted := []State{StateInputRequired, StateAuthRequired}
	all := append(append([]State{StateSubmitted, StateWorking}, terminal...), interrupted...)
	for _, s := range all {
		assert.Equal(t, slices.Contains(terminal, s), s.Terminal(), s)
		assert.Equal(t, slices.Contains(interrupted, s), s.Interrupted(), s)
	}
	for sdkState, want := range map[sdk.TaskState]State{
		sdk.TaskStateSubmitted: StateSubmitted, sdk.TaskStateWorking: StateWorking,
		sdk.TaskStateCompleted: StateCompleted, sdk.TaskStateFailed: StateFailed,
		sdk.TaskStateRejected: StateRejected, sdk.TaskStateCanceled: StateCanceled,
		sdk.TaskStateInputRequired: StateInputRequired, sdk.TaskStateAuthRequired: StateAuthRequired,
		sdk.TaskStateUnspecified: "", "TASK_STATE_NEW_THING": "",
	} {
		assert.Equal(t, want, stateOf(sdkState), sdkState)
	}
}

// TestSendDepth: a request's Depth reaches the agent as the message metadata baton/depth
// (on every binding), and a request without one sends none.
func TestSendDepth(t *testing.T) {
	leakCheck(t)
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			p := startPeer(t, peerOptions{card: v.card, streaming: v.streaming})
			a := resolve(t, p, v.force)
			res, err := a.Send(testCtx(t), Request{Prompt: "depth", Depth: 3}, Observer{})
			require.NoError(t, err)
			assert.Equal(t, "depth=3", res.Text)
			res, err = a.Send(testCtx(t), Request{Prompt: "depth"}, Observer{})
			require.NoError(t, err)
			assert.Equal(t, "depth=<nil>", res.Text)
		})
	}
}

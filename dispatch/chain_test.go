package dispatch_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/baton-dev/baton/dispatch"
)

// fakeRun records the steps a call goes through; fenced makes MayAct refuse.
type fakeRun struct {
	mu     sync.Mutex
	steps  []string
	fenced error
}

func (f *fakeRun) note(step string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.steps = append(f.steps, step)
}

// fakeSteps is the engine's side of the chain (dispatch.Run): it holds no run, and notes
// each step in the run it is given.
type fakeSteps struct{}

func (fakeSteps) MayAct(_ context.Context, run *fakeRun) error {
	run.note("fence")
	return run.fenced
}

func (fakeSteps) Trace(next dispatch.Handler[*fakeRun, string]) dispatch.Handler[*fakeRun, string] {
	return func(ctx context.Context, run *fakeRun, c dispatch.Call) (string, error) {
		run.note("trace")
		out, err := next(ctx, run, c)
		run.note("trace end")
		return out, err
	}
}

func (fakeSteps) Journal(next dispatch.Handler[*fakeRun, string]) dispatch.Handler[*fakeRun, string] {
	return func(ctx context.Context, run *fakeRun, c dispatch.Call) (string, error) {
		run.note("journal")
		out, err := next(ctx, run, c)
		run.note("journal end")
		return out, err
	}
}

// handler is the chain's handler: it runs in the run it is given.
func handler(_ context.Context, run *fakeRun, c dispatch.Call) (string, error) {
	run.note("handler")
	return "done " + c.ID, nil
}

func TestChainRunsFenceTraceJournalInOrder(t *testing.T) {
	run := &fakeRun{}
	ch := dispatch.New(fakeSteps{}, handler)
	if got, want := ch.Steps(), []string{"fence", "trace", "journal"}; !slices.Equal(got, want) {
		t.Fatalf("steps %v, want %v", got, want)
	}
	out, err := ch.Run(context.Background(), run, dispatch.Call{ID: "call_1", Name: "search", Arguments: "{}"})
	if err != nil || out != "done call_1" {
		t.Fatalf("Run = %q, %v; want the handler's outcome", out, err)
	}
	want := []string{"fence", "trace", "journal", "handler", "journal end", "trace end"}
	if !slices.Equal(run.steps, want) {
		t.Fatalf("steps ran as %v, want %v", run.steps, want)
	}
}

func TestFencedCallRunsNeitherJournalNorHandler(t *testing.T) {
	lost := errors.New("lease lost")
	run := &fakeRun{fenced: lost}
	out, err := dispatch.New(fakeSteps{}, handler).Run(context.Background(), run, dispatch.Call{ID: "call_1"})
	if !errors.Is(err, dispatch.ErrFenced) || !errors.Is(err, lost) {
		t.Fatalf("err = %v, want ErrFenced wrapping the fence's error", err)
	}
	if out != "" {
		t.Fatalf("outcome %q for a call that did not run", out)
	}
	if want := []string{"fence"}; !slices.Equal(run.steps, want) {
		t.Fatalf("steps ran as %v, want only %v (no trace, journal or handler)", run.steps, want)
	}
}

func TestValidateDecodesArgumentsOrRefuses(t *testing.T) {
	run := &fakeRun{}
	var got map[string]any
	h := func(_ context.Context, _ *fakeRun, c dispatch.Call) (string, error) {
		got = c.Args
		return "ran", nil
	}
	ch := dispatch.New(fakeSteps{}, h, dispatch.Validate(func(_ *fakeRun, c dispatch.Call) string { return "refused " + c.ID }))
	if names := ch.Steps(); !slices.Equal(names, []string{"fence", "trace", "journal", "validate"}) {
		t.Fatalf("steps %v", names)
	}
	out, _ := ch.Run(context.Background(), run, dispatch.Call{ID: "a", Arguments: `{"q":"x"}`})
	if out != "ran" || got["q"] != "x" {
		t.Fatalf("valid call: %q, args %v", out, got)
	}
	for _, bad := range []string{"", "null", "[1]", "{"} {
		out, err := ch.Run(context.Background(), run, dispatch.Call{ID: "b", Arguments: bad})
		if err != nil || out != "refused b" {
			t.Fatalf("arguments %q: %q, %v; want the refusal as the outcome", bad, out, err)
		}
	}
}

func TestRouterSendsEachKindToItsHandler(t *testing.T) {
	kinds := map[string]dispatch.Kind{"research": dispatch.Agent, "search": dispatch.MCP, "ask_user": dispatch.AskUser, "bad": dispatch.Kind(42)}
	handler := func(k dispatch.Kind) dispatch.Handler[*fakeRun, string] {
		return func(context.Context, *fakeRun, dispatch.Call) (string, error) { return k.String(), nil }
	}
	rt := &dispatch.Router[*fakeRun, string]{
		Kind: func(_ *fakeRun, name string) dispatch.Kind { return kinds[name] },
		Handlers: [dispatch.Kinds]dispatch.Handler[*fakeRun, string]{
			dispatch.Agent: handler(dispatch.Agent), dispatch.MCP: handler(dispatch.MCP),
			dispatch.AskUser: handler(dispatch.AskUser), dispatch.Other: handler(dispatch.Other),
		},
	}
	for name, want := range map[string]string{"research": "agent", "search": "mcp", "ask_user": "ask_user", "nope": "other", "bad": "other"} {
		if got, _ := rt.Handler()(context.Background(), &fakeRun{}, dispatch.Call{Name: name}); got != want {
			t.Errorf("%s went to %q, want %q", name, got, want)
		}
	}
}

func TestCheckAfterMiddlewareStopsTheRest(t *testing.T) {
	run := &fakeRun{}
	refused := errors.New("refused")
	gate := dispatch.Step[*fakeRun, string]{Name: "gate", Check: func(_ context.Context, run *fakeRun, c dispatch.Call) error {
		run.note("gate")
		if c.ID == "stop" {
			return refused
		}
		return nil
	}}
	ch := dispatch.New(fakeSteps{}, handler, gate)
	if _, err := ch.Run(context.Background(), run, dispatch.Call{ID: "stop"}); !errors.Is(err, refused) {
		t.Fatalf("err = %v, want the gate's", err)
	}
	want := []string{"fence", "trace", "journal", "gate", "journal end", "trace end"}
	if !slices.Equal(run.steps, want) {
		t.Fatalf("steps ran as %v, want %v (no handler)", run.steps, want)
	}
}

func TestRunToSkipsTheNamedStepsAndRunsTheGivenHandler(t *testing.T) {
	run := &fakeRun{}
	ch := dispatch.New(fakeSteps{}, handler)
	follow := func(_ context.Context, run *fakeRun, c dispatch.Call) (string, error) {
		run.note("follow")
		return "followed " + c.ID, nil
	}
	out, err := ch.RunTo(context.Background(), run, dispatch.Call{ID: "call_1"}, follow, "journal")
	if err != nil || out != "followed call_1" {
		t.Fatalf("out %q, err %v", out, err)
	}
	if want := []string{"fence", "trace", "follow", "trace end"}; !slices.Equal(run.steps, want) {
		t.Fatalf("steps ran as %v, want %v", run.steps, want)
	}

	run.steps, run.fenced = nil, errors.New("lease lost")
	if _, err := ch.RunTo(context.Background(), run, dispatch.Call{ID: "call_2"}, follow, "journal"); !errors.Is(err, dispatch.ErrFenced) {
		t.Fatalf("err = %v, want ErrFenced", err)
	}
	if want := []string{"fence"}; !slices.Equal(run.steps, want) {
		t.Fatalf("a fenced call ran %v, want only %v", run.steps, want)
	}
}

// TestOneChainServesEveryRun: the chain holds nothing of a run: calls of two runs through
// one chain, at the same time, each go through the steps of their own run only, and a
// fenced run does not stop the other's calls.
func TestOneChainServesEveryRun(t *testing.T) {
	ch := dispatch.New(fakeSteps{}, handler)
	a, b := &fakeRun{}, &fakeRun{fenced: errors.New("lease lost")}
	var wg sync.WaitGroup
	var outA string
	var errA, errB error
	wg.Go(func() { outA, errA = ch.Run(context.Background(), a, dispatch.Call{ID: "a1"}) })
	wg.Go(func() { _, errB = ch.Run(context.Background(), b, dispatch.Call{ID: "b1"}) })
	wg.Wait()
	if errA != nil || outA != "done a1" {
		t.Fatalf("run a: %q, %v; want its handler's outcome", outA, errA)
	}
	if !errors.Is(errB, dispatch.ErrFenced) {
		t.Fatalf("run b: err %v, want ErrFenced", errB)
	}
	if want := []string{"fence", "trace", "journal", "handler", "journal end", "trace end"}; !slices.Equal(a.steps, want) {
		t.Fatalf("run a's steps %v, want %v", a.steps, want)
	}
	if want := []string{"fence"}; !slices.Equal(b.steps, want) {
		t.Fatalf("run b's steps %v, want %v", b.steps, want)
	}
}

package dispatch_test

import (
	"context"
	"testing"

	"github.com/baton-dev/baton/dispatch"
)

// benchRun is a run whose steps only count: what the chain itself costs per call.
type benchRun struct{ fenced, traced, journaled, handled int }

type benchSteps struct{}

func (benchSteps) MayAct(_ context.Context, run *benchRun) error {
	run.fenced++
	return nil
}

func (benchSteps) Trace(next dispatch.Handler[*benchRun, int]) dispatch.Handler[*benchRun, int] {
	return func(ctx context.Context, run *benchRun, c dispatch.Call) (int, error) {
		run.traced++
		return next(ctx, run, c)
	}
}

func (benchSteps) Journal(next dispatch.Handler[*benchRun, int]) dispatch.Handler[*benchRun, int] {
	return func(ctx context.Context, run *benchRun, c dispatch.Call) (int, error) {
		run.journaled++
		return next(ctx, run, c)
	}
}

// BenchmarkChainRun: one call through fence, trace, journal, validate and the router to
// its handler (the arguments' decoding is most of it).
func BenchmarkChainRun(b *testing.B) {
	rt := &dispatch.Router[*benchRun, int]{
		Kind: func(*benchRun, string) dispatch.Kind { return dispatch.MCP },
		Handlers: [dispatch.Kinds]dispatch.Handler[*benchRun, int]{
			dispatch.MCP: func(_ context.Context, run *benchRun, c dispatch.Call) (int, error) {
				run.handled++
				return len(c.Args), nil
			},
		},
	}
	ch := dispatch.New(benchSteps{}, rt.Handler(), dispatch.Validate(func(*benchRun, dispatch.Call) int { return -1 }))
	run := &benchRun{}
	c := dispatch.Call{ID: "call_1", Name: "search", Arguments: `{"q":"x"}`}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if n, err := ch.Run(ctx, run, c); err != nil || n != 1 {
			b.Fatalf("Run = %d, %v", n, err)
		}
	}
	if run.handled != run.fenced || run.traced != run.fenced || run.journaled != run.fenced {
		b.Fatalf("steps ran unevenly: %+v", *run)
	}
}

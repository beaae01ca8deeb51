package main

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/internal/config"
	"github.com/baton-dev/baton/llm/scripted"
	"github.com/baton-dev/baton/server"
	"github.com/baton-dev/baton/store"
)

// signalProber answers every probe and says so on probed.
type signalProber struct{ probed chan struct{} }

func (p signalProber) Probe(context.Context) error {
	select {
	case p.probed <- struct{}{}:
	default:
	}
	return nil
}

// startServices launches the engine (runs are accepted) and starts the sweeper and the
// probe; stopServices stops them all, once, and leaves no goroutine behind.
func TestServicesStartAndStop(t *testing.T) {
	before := goleak.IgnoreCurrent()
	ctx := context.Background()
	st, err := store.Open(ctx, "memory:")
	require.NoError(t, err)
	defer st.Close()
	log := slog.New(slog.DiscardHandler)
	engine, err := coordinator.New(coordinator.Config{Model: scripted.New(scripted.Config{}), Store: st,
		Logger: log, Heartbeat: 20 * time.Millisecond, Lease: time.Second})
	require.NoError(t, err)
	prober := signalProber{probed: make(chan struct{}, 1)}
	cfg := config.Default()
	cfg.Server.ShutdownGrace = config.Duration(time.Second)
	a := &app{ctx: ctx, cfg: cfg, log: log, engine: engine,
		sweeper: server.NewThreadSweeper(st, time.Hour, log), probe: newModelProbe(prober, "m", log)}

	require.NoError(t, a.startServices())
	<-prober.probed
	in := &agui.RunAgentInput{ThreadID: "t", RunID: "r", ProtocolVersion: "1.0",
		Messages: []agui.Message{{ID: "u", Role: "user", Content: agui.StringContent("hello")}}}
	r, err := engine.StartRun(context.Background(), in, "")
	require.NoError(t, err, "the engine was launched")
	<-r.Done()

	a.stopServices()
	_, err = engine.StartRun(context.Background(), in, "")
	assert.ErrorIs(t, err, coordinator.ErrShuttingDown)
	a.cleanup() // stopServices again, as at exit: nothing left to stop
	goleak.VerifyNone(t, before)
}

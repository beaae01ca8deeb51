package subagent

import (
	"errors"
	"testing"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/assert"
)

// recoverStream turns the SDK's panic into the stream's last error, and lets a panic of the
// loop body through untouched.
func TestRecoverStream(t *testing.T) {
	sdkPanics := func(yield func(sdk.Event, error) bool) {
		if !yield(&sdk.Task{ID: "t"}, nil) {
			return
		}
		panic("runtime error: invalid memory address or nil pointer dereference")
	}
	var events int
	var last error
	for ev, err := range recoverStream(sdkPanics) {
		if err != nil {
			last = err
			break
		}
		assert.NotNil(t, ev)
		events++
	}
	assert.Equal(t, 1, events)
	assert.ErrorIs(t, last, errSDKPanic)

	bodyPanic := errors.New("the caller's own")
	assert.PanicsWithValue(t, bodyPanic, func() {
		for range recoverStream(sdkPanics) {
			panic(bodyPanic)
		}
	})
}

// streamOnce's guard (recoverStream's, in place) lets a panic of the caller's own code, here
// its Observer called from the loop's body, go on instead of reporting it as the SDK's.
func TestStreamGuardLetsTheCallersPanicGoOn(t *testing.T) {
	leakCheck(t)
	p := startPeer(t, peerOptions{card: cardV10Only, streaming: true})
	a := resolve(t, p, "")
	own := errors.New("the caller's own")
	assert.PanicsWithValue(t, own, func() {
		_, _ = a.Send(testCtx(t), Request{Prompt: "complete"}, Observer{Task: func(string, string) { panic(own) }})
	})
}

package integration

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
)

// TestResumeWithNothingSuspended: through the coordinator binary and the official AG-UI
// clients, a resume naming interrupts on a thread with nothing suspended (a new thread, and
// a thread whose last run finished) gets the contract's failure shape (design/contract.md
// §9: RUN_STARTED, then RUN_ERROR INVALID_RESUME) naming the unknown ids; the message is not
// run as a new turn (the model is not asked). Before, the answers were dropped and the
// message ran as a plain turn.
func TestResumeWithNothingSuspended(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	model := fakellm.Start(hitlModel)
	t.Cleanup(model.Close)
	coord := startHITLCoordinator(t, hitlEnv{llmURL: model.URL}.yaml())
	for _, lane := range lanes {
		t.Run(lane, func(t *testing.T) {
			finished := newThreadID("resume-finished-" + lane)
			r := runHITLClient(t, lane, coord.URL, hitlJobOn(finished, newThreadID("run"), "hello"))
			assertRun(t, r.hitlRun, "success")

			for _, thread := range []string{newThreadID("resume-new-" + lane), finished} {
				requests := len(model.Requests())
				job := hitlJobOn(thread, newThreadID("run"), "a message that must not run")
				job["resume"] = []any{resumeEntry("int-unknown", resolved(map[string]any{"text": "x"}))}
				r := runHITLClient(t, lane, coord.URL, job)
				assertResumeError(t, r.hitlRun, "INVALID_RESUME")
				if msg, _ := r.RunError["message"].(string); assert.NotEmpty(t, msg) {
					assert.Contains(t, msg, "int-unknown", "the message names the unknown id")
				}
				assert.Equal(t, requests, len(model.Requests()), "the message did not run as a new turn")
			}
		})
	}
}

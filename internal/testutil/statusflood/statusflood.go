// Package statusflood is an A2A 1.0 JSON-RPC agent for tests and benchmarks of status
// floods: a task that sends its `working` status updates as fast as it can (served by
// streampeer, whose doc says why a2a-go's server is not used: 2,000 updates took 94 s
// through it; 10,000 did not finish in 5 minutes).
package statusflood

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/baton-dev/baton/internal/testutil/streampeer"
)

// Start serves the agent until the test ends and returns its base URL (the card is at the
// well-known path). A message "<n>" makes a task that sends n working status updates,
// each with its own message "step i of n", then completes; "<n> artifact" sends an
// artifact "done" before it completes.
func Start(tb testing.TB) string {
	tb.Helper()
	var seq atomic.Int64
	return streampeer.Serve(tb, "statusflood", func(prompt string, send streampeer.Send) {
		f := strings.Fields(prompt)
		n := 0
		if len(f) > 0 {
			n, _ = strconv.Atoi(f[len(f)-1])
			if len(f) > 1 && f[len(f)-1] == "artifact" {
				n, _ = strconv.Atoi(f[len(f)-2])
			}
		}
		task := &sdk.Task{ID: sdk.TaskID(fmt.Sprintf("t-flood-%d", seq.Add(1))), ContextID: "c-flood", Status: sdk.TaskStatus{State: sdk.TaskStateSubmitted}}
		if !send(task) {
			return
		}
		for i := 1; i <= n; i++ {
			m := sdk.NewMessage(sdk.MessageRoleAgent, sdk.NewTextPart(fmt.Sprintf("step %d of %d", i, n)))
			m.ID = fmt.Sprintf("m-%d", i)
			m.TaskID, m.ContextID = task.ID, task.ContextID
			if !send(&sdk.TaskStatusUpdateEvent{TaskID: task.ID, ContextID: task.ContextID,
				Status: sdk.TaskStatus{State: sdk.TaskStateWorking, Message: m}}) {
				return
			}
		}
		if strings.HasSuffix(prompt, "artifact") {
			send(&sdk.TaskArtifactUpdateEvent{TaskID: task.ID, ContextID: task.ContextID, LastChunk: true,
				Artifact: &sdk.Artifact{ID: "answer", Parts: []*sdk.Part{sdk.NewTextPart("done")}}})
		}
		send(&sdk.TaskStatusUpdateEvent{TaskID: task.ID, ContextID: task.ContextID, Status: sdk.TaskStatus{State: sdk.TaskStateCompleted}})
	})
}

package integration

import (
	"fmt"
	"testing"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
)

func TestZZScratch(t *testing.T) {
	peer := startA2APeerEnv(t, "A2A_LEGACY=0")
	model := fakellm.Start(func(r fakellm.Request) fakellm.Reply {
		rep := testModel(r)
		for i := range rep.ToolCalls {
			rep.ToolCalls[i].ID = ""
		}
		return rep
	})
	t.Cleanup(model.Close)
	coord := startCoordinator(t, coordinatorYAML(model.URL, agentEntry{Name: "peer", URL: peer}))
	for _, lane := range lanes {
		r := runAGUIClient(t, lane, coord+"/agui", userJob("dup", "peer: input then-continue"))
		fmt.Println(lane, "failed", r.Failed, "terminal", r.Terminal, "warnings", r.Warnings, eventTypes(r.Events))
		for _, e := range eventsOfType(r.Events, "TOOL_CALL_RESULT") {
			fmt.Println("  ", e["toolCallId"], e["content"])
		}
	}
}

package coordinator

import (
	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/failure"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/store"
)

// Takeover: a replica continues the runs of a replica that died (or handed them off), from
// the checkpoint each run keeps in its work document (design/takeover.md).
//
// Design note: the checkpoint is the run's conversation after its last completed model
// turn (with the turn's tool calls, when it made some), the failure state at that point,
// the run's input (without its messages once the conversation holds them) and its owner;
// the results of the turn's tool calls are added as they end. It is written by the run's
// event-log writer with the rest of the work document, so the run never waits for it and
// no token is ever written on its own. A replica that takes the run over reads the log to
// continue its numbering and to know what the stream has open, closes what it cannot
// continue, and settles the turn's calls without a result by kind (resumeDecision): an A2A
// task is followed by id and never sent again, an idempotent or read-only MCP call is sent
// again, any other call that may have run is reported to the model as such; then the loop
// goes on with the next model turn. A model turn cut mid-stream is simply asked again.
// takenOver is what a run taken over starts from (Run.resumed).
type takenOver struct {
	cp   durable.Checkpoint
	conv []llm.Message // nil: the run starts over from its input
	// stored are the thread's messages conv holds, which the checkpoint named.
	stored storedMessages
	fs     failure.State
	work   durable.Work
	// fresh: not even RUN_STARTED reached the log; the stream starts here.
	fresh bool
	// started and resulted: the tool calls whose TOOL_CALL_START and TOOL_CALL_RESULT
	// reached the log. The work document is stored ahead of the events, so a result the
	// checkpoint holds may be missing from the log; the new owner streams it (missingResults).
	started, resulted map[string]bool
}

// recRef is the journal's reference to a run record, under the record's epoch.
func recRef(rec store.RunRecord) durable.RunRef {
	return durable.RunRef{ThreadID: rec.ThreadID, RunID: rec.RunID, Epoch: rec.Epoch}
}

package durable

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/baton-dev/baton/agui"
)

// CheckpointVersion is the version of the checkpoint document; a replica refuses (and
// ends) a run whose checkpoint it does not know. Version 2 is version 1 whose history
// (Conv) may name the thread's messages ({"ref": id}) instead of holding them: a replica
// of version 1 would read such an entry as an empty message, so it refuses it.
const CheckpointVersion = 2

// minCheckpointVersion is the oldest version a replica reads: version 1 is version 2
// without names.
const minCheckpointVersion = 1

// ErrCheckpoint: a run's checkpoint cannot be read (not JSON, an unknown version, no
// input): the run cannot be continued from it.
var ErrCheckpoint = errors.New("durable: checkpoint unreadable")

// Checkpoint is what a replica needs to continue a run (Work.Checkpoint). Which state goes
// into it, and what a replica does with it, are the run loop's; its encoding is here.
type Checkpoint struct {
	V     int    `json:"v"`
	Owner string `json:"owner,omitempty"`
	// Input is the run's input; its messages are left out once Conv holds the history.
	Input json.RawMessage `json:"input"`
	// Prepended says that Input's messages are only those of the client's messages that
	// the thread does not keep (without an id): the engine prepended the thread's stored
	// history to them, and the run's start saved the others to the thread, which a
	// replica taking the run over before Conv is set reads again rather than a copy here
	// (a copy of the whole conversation per run, written at every start).
	Prepended bool `json:"prepended,omitempty"`
	// Conv is the model history after the last completed turn, a JSON array of messages
	// where, from version 2, a message the thread keeps is named by its id
	// ({"ref": id}); absent until the run's setup is done (the run then starts over from
	// its input).
	Conv json.RawMessage `json:"conv,omitempty"`
	// State is the failure state (counters, lessons, loop signatures, budget use, active
	// time) when the checkpoint was taken.
	State json.RawMessage `json:"state,omitempty"`
	// Seq is the event log's last number when the checkpoint was taken (informative: the
	// replica continues after the log's actual end).
	Seq int64 `json:"seq"`
	// Depth is the run's nesting depth, which its input does not carry.
	Depth int `json:"depth,omitempty"`
	// Budget is what is left, past State's budget use, of the budget the run's caller gave
	// it, which its input does not carry either.
	Budget *agui.CallerBudget `json:"budget,omitempty"`
}

// Encode encodes cp (its V set to CheckpointVersion) with the run's input in. Before the
// run's setup (no Conv) and when the first prepended of in's messages are the thread's
// stored history, only those of the others that the thread does not keep (without an id)
// are kept; once Conv holds the history, none are. An input that cannot be encoded is an
// error: the run then cannot be taken over.
func (cp Checkpoint) Encode(in agui.RunAgentInput, prepended int) (json.RawMessage, error) {
	cp.V = CheckpointVersion
	if cp.Conv == nil && prepended > 0 && prepended <= len(in.Messages) {
		// The run's start saves the client's messages that have an id to the thread too:
		// only those without one are kept here.
		var own []agui.Message
		for _, m := range in.Messages[prepended:] {
			if m.ID == "" {
				own = append(own, m)
			}
		}
		in.Messages = own
		cp.Prepended = true
	}
	if cp.Conv != nil {
		in.Messages = nil
	}
	b, err := json.Marshal(&in)
	if err != nil {
		return nil, fmt.Errorf("encode the checkpoint's input: %w", err)
	}
	cp.Input = b
	return json.Marshal(&cp)
}

// DecodeCheckpoint reads a checkpoint document; ErrCheckpoint when it is not one this
// replica knows (not JSON, another version, no input).
func DecodeCheckpoint(doc json.RawMessage) (Checkpoint, error) {
	var cp Checkpoint
	if err := json.Unmarshal(doc, &cp); err != nil {
		return cp, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	if cp.V < minCheckpointVersion || cp.V > CheckpointVersion {
		return cp, fmt.Errorf("%w: version %d", ErrCheckpoint, cp.V)
	}
	if len(cp.Input) == 0 || string(cp.Input) == "null" {
		return cp, fmt.Errorf("%w: no input", ErrCheckpoint)
	}
	return cp, nil
}

// CheckpointOwner is the principal of the run whose work w is, from its checkpoint; ""
// (the anonymous principal) when it has none or it cannot be read.
func CheckpointOwner(w Work) string {
	var cp struct {
		Owner string `json:"owner"`
	}
	if len(w.Checkpoint) == 0 || json.Unmarshal(w.Checkpoint, &cp) != nil {
		return ""
	}
	return cp.Owner
}

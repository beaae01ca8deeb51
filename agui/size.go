package agui

// eventOverhead approximates what an event costs beyond its variable text: the Go value,
// its ids and the frame's fixed JSON.
const eventOverhead = 192

// SizeHint returns about how many bytes ev holds while it waits to be written: its text
// fields plus a fixed overhead. Events whose content is free-form (snapshots, custom values,
// results, metadata) are measured by encoding them, which is exact but costs an encode;
// they are rare. A bounded buffer counts events by this size.
func SizeHint(ev Event) int {
	if b, ok := ev.(baser); ok && len(b.base().Metadata) > 0 {
		return encodedSize(ev)
	}
	switch e := ev.(type) {
	case *TextMessageContent:
		return eventOverhead + len(e.Delta)
	case *ToolCallArgs:
		return eventOverhead + len(e.Delta)
	case *ToolCallResult:
		return eventOverhead + len(e.Content)
	case *TextMessageStart, *TextMessageEnd, *ToolCallStart, *ToolCallEnd, *StepStarted, *StepFinished, *RunStarted:
		return eventOverhead
	case *RunError:
		return eventOverhead + len(e.Message)
	case *SubagentError:
		return eventOverhead + len(e.Message)
	case *SubagentStarted:
		return eventOverhead + len(e.Description)
	}
	return encodedSize(ev)
}

func encodedSize(ev Event) int {
	b, err := appendFrame(nil, ev)
	if err != nil {
		return eventOverhead
	}
	return len(b)
}

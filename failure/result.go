package failure

// ToolResult is the typed outcome of one tool call, as the failure model, metrics and logs
// read it: nobody parses Text back. Text is rendered once, where the result is made, and is
// exactly what the model and TOOL_CALL_RESULT get.
type ToolResult struct {
	// Text is the tagged string (DESIGN §5).
	Text string
	// Tag is the tag of Text's first line (bridge.TagOK, bridge.TagRetry, ...).
	Tag string
	// Code is the retry code when Tag is bridge.TagRetry.
	Code string
	// Gap: the tool said it cannot serve this kind of request (capability_gap). Set from
	// the protocol's classification (a2a.ErrCapabilityGap), never from text.
	Gap bool
	// Message is Baton's own message of a retry signal (a policy refusal explains itself).
	Message string
}

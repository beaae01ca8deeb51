// Package history decides what the model is sent of a long thread; the thread itself keeps
// every message (design/history.md).
//
// Everything here is a pure function over llm messages: cutting tool results to
// history.max_tool_result_bytes with the [TRUNCATED:bytes=N] marker (DESIGN §5), the context
// window of a model (llm.context_window, else a built-in table of well-known models, else a
// conservative default), the token estimate a request is measured by, where a conversation
// is cut for compaction (what is summarised, what is kept verbatim), the requests that ask
// the model for the summary, and how a stored compaction is applied again to the thread's
// messages on a later run. The engine (package coordinator) calls the model, journals the
// step and stores the summary.
package history

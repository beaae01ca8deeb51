// Package a2aserver serves Baton as an A2A agent (DESIGN §9c) on a2a-go's server packages:
// the 1.0 JSON-RPC and HTTP+JSON bindings, the 0.3 ones through a2acompat/a2av0, and the
// agent card.
//
// A task is a run of Baton's engine: a message starts a run on the caller's thread (the
// task's contextId is the thread id), the run's AG-UI events are read and turned into A2A
// events (the answer's text as artifact updates; the run's end as the task's state), an
// interrupt of the run becomes input-required with the question and a DataPart naming the
// interrupt, and the caller's next message on the task is the answer, sent to the engine as
// an AG-UI resume. CancelTask stops the run and waits until every downstream cancel is
// confirmed (or its horizon passes). design/a2a-server.md has the whole mapping.
//
// The package never imports the engine: it is given an [Engine], which cmd/coordinator
// adapts from coordinator.Engine.
package a2aserver

// Package demoagent implements Baton's demo A2A sub-agents, "travel" and "research".
//
// Each agent is an a2a-go/v2 server that speaks A2A 1.0 (JSON-RPC at /a2a) and A2A 0.3
// (JSON-RPC at /a2a/v0), and publishes one union agent card at
// /.well-known/agent-card.json that both protocol generations can read. Behaviour is
// deterministic and driven by the text of the user's message, so the demo stack and the
// tests can reach every task state on purpose:
//
//   - travel: asks for the dates with input-required unless the request already holds a
//     date-like token (a digit); the answer to that question completes the task with an
//     "Itinerary" artifact.
//   - research: "fail" → failed, "reject" → rejected, "auth" → auth-required, "slow" → 20
//     paced progress chunks that honour cancellation, "message" → a plain Message reply
//     without a task; anything else → a "Report" artifact streamed in chunks, then completed.
//
// Design note: auth-required in a2a-go. The SDK does not treat auth-required as the end of
// an execution (it expects credentials to arrive out of band while the executor waits), so
// a follow-up message to that task would be refused with "execution in progress". The
// research agent therefore parks its execution after auth-required, and a thin
// RequestHandler decorator (resumer) recognises a follow-up message addressed to a parked
// task: it subscribes to the live execution, hands the message to the parked executor and
// relays the events, so to a client the follow-up behaves like the continuation of an
// input-required task. Parked executions end on CancelTask or when the server closes.
package demoagent

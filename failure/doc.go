// Package failure is Baton's failure model (DESIGN §6, design/failure-model.md): the closed
// set of failure kinds, the pure detectors that classify a model turn, a tool result, a
// repeated call or an exhausted budget into a *Failure, the Policy that turns a failure and
// the run's State into a Decision, and the lessons the model is told about on its next turn.
//
// It knows nothing of a run: the engine (package coordinator) feeds it typed results and
// acts on its decisions. A typical turn:
//
//	var st failure.State
//	p := &failure.DefaultPolicy{}
//	if f := failure.DetectToolResult(tool, res); f != nil {
//		d := p.Decide(*f, &st) // retry, narrow_scope, ask_user, handoff or stop
//		_ = d
//	}
//	st.ObserveRound(results)
//
// State is plain data with JSON tags, so it survives a run's suspension and resume.
package failure

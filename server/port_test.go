package server

import "github.com/baton-dev/baton/coordinator"

// runsOf is the engine's port over e, as cmd/coordinator builds it, with the port's own
// settings (followers) when given.
func runsOf(e *coordinator.Engine, rc ...coordinator.RunsConfig) *coordinator.Runs {
	var c coordinator.RunsConfig
	if len(rc) > 0 {
		c = rc[0]
	}
	return coordinator.NewRuns(e, c)
}

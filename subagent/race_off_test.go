//go:build !race

package subagent

// raceEnabled: see race_on_test.go.
const raceEnabled = false

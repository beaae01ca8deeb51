//go:build !race

package a2a

// raceEnabled: see race_on_test.go.
const raceEnabled = false

//go:build race

package subagent

// raceEnabled: the race detector slows JSON decoding about tenfold, so the large-artifact
// test streams less under it (the benchmark and plain `go test` stream the full size).
const raceEnabled = true

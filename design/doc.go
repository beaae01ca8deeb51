// Package design holds Baton's contract (contract.md, identical to the shared DESIGN.md) and
// the design notes for its non-obvious mechanisms. The only Go code here is the test that keeps
// the contract in step with the shared copy.
package design

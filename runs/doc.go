// Package runs is the vocabulary of the engine's one port: what every surface (AG-UI in
// server, A2A in a2aserver, MCP in mcpserver) hands the engine and gets back when it starts,
// follows, resumes and stops runs, and reads a principal's threads, journal and A2A tasks.
//
// The port itself is coordinator.Runs. A surface declares the part of it that it uses as an
// interface of its own and names only this package's types, so no surface imports the
// engine or the store: ownership is checked, admission counted and a run followed from its
// live queue or its stored log inside the port, once for every surface.
package runs

package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"strings"
)

const usageText = `Baton coordinator: an AG-UI server whose LLM delegates to A2A sub-agents and MCP tools.

Usage:
  coordinator [flags]              the embedded demo stack on loopback (no config)
  coordinator --config baton.yaml  a configured deployment
  coordinator --mcp-stdio [--config baton.yaml]
                                   MCP over stdin and stdout, for MCP clients that launch
                                   a command (docs/mcp-server.md)
  coordinator help                 this help

Flags:
`

const usageTrailer = `
Every scalar config key can also come from a BATON_* environment variable (BATON_LISTEN,
BATON_LLM_PROVIDER, BATON_STORE, ...). Health: GET /healthz; readiness: GET /readyz.
`

// wantsHelp reports whether the flags ask for help (-h, -help, --help), which is
// answered on stdout with exit code 0 rather than as a flag error.
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help", "--h":
			return true
		}
	}
	return false
}

// printUsage writes the help text, flags included, to w.
func printUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, usageText)
	out := fs.Output()
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(out)
	fmt.Fprint(w, usageTrailer)
}

// versionString describes the build: the -X main.version stamp when given, else the
// module version from the build info, with the VCS revision Go stamps into binaries
// built from a checkout ("+dirty" when the tree had local changes).
func versionString(stamped string, bi *debug.BuildInfo, ok bool) string {
	v := stamped
	var rev, modified string
	if ok && bi != nil {
		if v == "" || v == "dev" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
	}
	if v == "" || v == "dev" {
		v = "(devel)"
	}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if modified == "true" {
			rev += "+dirty"
		}
		if !strings.Contains(v, rev[:min(len(rev), 12)]) {
			v += " " + rev
		}
	}
	return v
}

// displayURL is the URL to print for a listener: an unspecified host (":8080",
// "0.0.0.0", "[::]") is reachable as localhost, which a browser can open.
func displayURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String()
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

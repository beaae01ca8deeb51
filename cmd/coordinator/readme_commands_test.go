package main

import (
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"mvdan.cc/sh/v3/syntax"
)

// TestREADMECommandsNameWhatExists parses every ```sh block of README.md as shell and checks
// each command against the repository as a fresh clone has it: make targets exist, `go run`
// packages exist and define the flags and subcommands given, `go test -run` patterns match
// tests of the packages named, compose files and profiles exist, the proxy configs and peer
// scripts exist, curl examples use the coordinator's routes, and every environment variable
// set or exported is read by something in the repository. A command of a kind nothing here
// checks fails the test, so a new kind of example comes with its check. What the commands do
// when run is TestREADMECurlExamples' (the curl examples against the demo stack) and
// internal/config's TestREADMEConfigExamples' (the YAML blocks) business; this test is static
// and fast.
func TestREADMECommandsNameWhatExists(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	c := newCommandChecker(t, root)
	problems := c.checkMarkdown(readDocs(t, root))
	assert.Empty(t, problems)
	assert.GreaterOrEqual(t, c.checked, 25, "the README's commands were found and checked")
}

// TestREADMECommandCheckCanFail feeds the checker one wrong command of each kind.
func TestREADMECommandCheckCanFail(t *testing.T) {
	t.Parallel()
	c := newCommandChecker(t, filepath.Join("..", ".."))
	md := "```sh\n" + strings.Join([]string{
		"make no-such-target",
		"make demo NO_SUCH_VARIABLE=1",
		"go run ./cmd/demo-agent --agent travel --port 1",
		"go run ./cmd/demo-mcp carrier-pigeon",
		"go run ./cmd/no-such-command",
		"go test -run TestNoSuchTestAnywhere ./integration/",
		"docker compose --profile no-such-profile up",
		"docker compose -f deploy/no-such/compose.yml up",
		"nginx -c \"$PWD/deploy/proxies/no-such.conf\"",
		"curl -N http://127.0.0.1:8080/agui/no-such-route",
		"bin/coordinator --listen 127.0.0.1:9090",
		"BATON_NO_SUCH_VARIABLE=1 go run ./cmd/coordinator",
		"(cd integration/peers && node no-such.mjs)",
		"frobnicate --now",
	}, "\n") + "\n```\n"
	problems := c.checkMarkdown(md)
	for _, want := range []string{
		`make target "no-such-target"`,
		`make variable "NO_SUCH_VARIABLE"`,
		`flag "port"`,
		`argument "carrier-pigeon"`,
		`package ./cmd/no-such-command`,
		`-run "TestNoSuchTestAnywhere"`,
		`profile "no-such-profile"`,
		`deploy/no-such/compose.yml`,
		`deploy/proxies/no-such.conf`,
		`route /agui/no-such-route`,
		`flag "listen"`,
		`BATON_NO_SUCH_VARIABLE`,
		`no-such.mjs`,
		`"frobnicate"`,
	} {
		found := false
		for _, p := range problems {
			found = found || strings.Contains(p, want)
		}
		assert.True(t, found, "no problem mentions %s; problems: %q", want, problems)
	}
	assert.Len(t, problems, 14, "one problem per wrong command: %q", problems)
}

// commandChecker holds what the checks compare against: the repository's files, read once.
type commandChecker struct {
	root     string
	makeT    map[string]bool
	makefile string
	routes   []*regexp.Regexp
	corpus   string // every file an environment variable could be read from
	checked  int
}

func newCommandChecker(t *testing.T, root string) *commandChecker {
	t.Helper()
	c := &commandChecker{root: root, makeT: map[string]bool{}}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	require.NoError(t, err)
	c.makefile = string(mk)
	for _, m := range regexp.MustCompile(`(?m)^([A-Za-z0-9_-]+):`).FindAllStringSubmatch(string(mk), -1) {
		c.makeT[m[1]] = true
	}
	// The coordinator's routes, as the server registers them (chi patterns).
	var src strings.Builder
	for _, f := range []string{"server/server.go", "server/oauth.go"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		require.NoError(t, err)
		src.Write(b)
	}
	for _, m := range regexp.MustCompile(`r\.(?:Get|Post|Delete|Put)\("([^"]+)"`).FindAllStringSubmatch(src.String(), -1) {
		p := regexp.QuoteMeta(m[1])
		p = regexp.MustCompile(`\\\{[^}]*\\\}`).ReplaceAllString(p, `[^/]+`)
		c.routes = append(c.routes, regexp.MustCompile("^"+p+"$"))
	}
	// The MCP endpoint and its metadata, mounted under the constants that name them.
	mcpSrc, err := os.ReadFile(filepath.Join(root, "server", "mcp.go"))
	require.NoError(t, err)
	for _, m := range regexp.MustCompile(`(?m)^\s*MCP\w*Path\s*=\s*"(/[^"]*)"`).FindAllStringSubmatch(string(mcpSrc), -1) {
		c.routes = append(c.routes, regexp.MustCompile("^"+regexp.QuoteMeta(m[1])+"$"))
	}
	require.NotEmpty(t, c.routes, "the server's routes were found")
	var corpus strings.Builder
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "node_modules" || n == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".yaml", ".yml", ".mjs", ".sh":
		default:
			if d.Name() != "Makefile" && d.Name() != "Dockerfile" {
				return nil
			}
		}
		if strings.HasSuffix(path, "readme_commands_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		corpus.Write(b)
		corpus.WriteByte('\n')
		return nil
	})
	require.NoError(t, err)
	c.corpus = corpus.String()
	return c
}

var fencedShBlock = regexp.MustCompile("(?s)```sh\n(.*?)```")

// checkMarkdown checks every command of every ```sh block of md and returns the problems.
func (c *commandChecker) checkMarkdown(md string) []string {
	var problems []string
	for i, m := range fencedShBlock.FindAllStringSubmatch(md, -1) {
		f, err := syntax.NewParser().Parse(strings.NewReader(m[1]), fmt.Sprintf("block%d", i+1))
		if err != nil {
			problems = append(problems, fmt.Sprintf("sh block %d does not parse: %v", i+1, err))
			continue
		}
		cwd := c.root
		// Shell functions the block defines: their bodies are checked, their calls are not.
		funcs := map[string]bool{}
		syntax.Walk(f, func(n syntax.Node) bool {
			if fn, ok := n.(*syntax.FuncDecl); ok {
				funcs[fn.Name.Value] = true
			}
			return true
		})
		syntax.Walk(f, func(n syntax.Node) bool {
			switch n := n.(type) {
			case *syntax.DeclClause: // export VAR=...
				for _, a := range n.Args {
					if a.Name != nil {
						problems = append(problems, c.checkEnv(a.Name.Value)...)
					}
				}
			case *syntax.CallExpr:
				if len(n.Args) == 0 {
					return true // VAR=$(...): a shell variable the block uses itself
				}
				for _, a := range n.Assigns {
					problems = append(problems, c.checkEnv(a.Name.Value)...)
				}
				args := make([]string, len(n.Args))
				for j, w := range n.Args {
					args[j] = strings.ReplaceAll(wordText(w), "$PWD", c.root)
				}
				c.checked++
				if funcs[args[0]] {
					return true
				}
				var p []string
				p, cwd = c.checkCommand(args, cwd)
				problems = append(problems, p...)
			}
			return true
		})
	}
	return problems
}

// wordText is w as the shell would pass it when its expansions are left as written.
func wordText(w *syntax.Word) string {
	var b strings.Builder
	var parts func([]syntax.WordPart)
	parts = func(ps []syntax.WordPart) {
		for _, p := range ps {
			switch p := p.(type) {
			case *syntax.Lit:
				b.WriteString(p.Value)
			case *syntax.SglQuoted:
				b.WriteString(p.Value)
			case *syntax.DblQuoted:
				parts(p.Parts)
			case *syntax.ParamExp:
				b.WriteString("$" + p.Param.Value)
			default:
				b.WriteString("$(…)")
			}
		}
	}
	parts(w.Parts)
	return b.String()
}

func (c *commandChecker) checkEnv(name string) []string {
	if !regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`).MatchString(c.corpus) {
		return []string{fmt.Sprintf("environment variable %s is set, but nothing in the repository reads it", name)}
	}
	return nil
}

func (c *commandChecker) exists(dir, path string) bool {
	if !filepath.IsAbs(path) && !strings.HasPrefix(path, c.root) {
		path = filepath.Join(dir, path)
	}
	_, err := os.Stat(path)
	return err == nil
}

// checkCommand checks one command and returns its problems and the working directory after it.
func (c *commandChecker) checkCommand(args []string, cwd string) ([]string, string) {
	var problems []string
	bad := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	switch args[0] {
	case "cd":
		if len(args) != 2 || !c.exists(cwd, args[1]) {
			bad("cd %v: no such directory", args[1:])
			return problems, cwd
		}
		return problems, filepath.Join(cwd, args[1])
	case "make":
		for _, a := range args[1:] {
			if name, _, ok := strings.Cut(a, "="); ok {
				// A variable on make's command line must be one the Makefile reads.
				if !strings.Contains(c.makefile, "$("+name+")") {
					bad("make variable %q is not read by the Makefile", name)
				}
				continue
			}
			if !c.makeT[a] {
				bad("make target %q is not in the Makefile", a)
			}
		}
	case "go":
		problems = append(problems, c.checkGo(args[1:])...)
	case "docker":
		problems = append(problems, c.checkCompose(args[1:])...)
	case "nginx", "haproxy", "caddy":
		for i, a := range args {
			if (a == "-c" || a == "-f" || a == "--config") && i+1 < len(args) && !c.exists(cwd, args[i+1]) {
				bad("%s: config %s does not exist", args[0], strings.TrimPrefix(args[i+1], c.root+"/"))
			}
		}
	case "npm":
		if !c.exists(cwd, "package-lock.json") {
			bad("npm %s: no package-lock.json in %s", strings.Join(args[1:], " "), cwd)
		}
	case "node":
		if len(args) < 2 || !c.exists(cwd, args[1]) {
			bad("node %v: no such script in %s", args[1:], cwd)
		}
	case "curl":
		for _, a := range args[1:] {
			u, err := url.Parse(a)
			if err != nil || u.Scheme == "" || u.Host == "" {
				continue
			}
			if p := u.Port(); p != "8080" && p != "8081" {
				continue // not the coordinator: the example IdP, Jaeger
			}
			found := false
			for _, r := range c.routes {
				found = found || r.MatchString(u.Path)
			}
			if !found {
				bad("curl %s: the coordinator has no route %s", a, u.Path)
			}
		}
	case "bin/coordinator", "bin/demo-agent", "bin/demo-mcp":
		// What make build writes: the command of ./cmd/<name>, with its flags.
		if !c.makeT["build"] {
			bad("%s: the Makefile has no build target to write it", args[0])
		}
		problems = append(problems, c.checkGo(append([]string{"run", "./cmd/" + strings.TrimPrefix(args[0], "bin/")}, args[1:]...))...)
	case "grep", "cut", "sed", "tr", "awk", "head", "echo":
		// Text filters on the output of the command before them, and echo.
	case "sleep", "kill":
		// Waiting for the coordinator, and stopping the one the block started.
	default:
		bad("command %q: the README test has no check for it; add one", args[0])
	}
	return problems, cwd
}

// checkGo checks `go run ./cmd/X [flags] [args]` and `go test [flags] [-run re] pkgs`.
func (c *commandChecker) checkGo(args []string) []string {
	var problems []string
	bad := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	if len(args) == 0 {
		return []string{"go: no subcommand"}
	}
	switch args[0] {
	case "run":
		if len(args) < 2 {
			return []string{"go run: no package"}
		}
		pkg := args[1]
		src := c.packageSource(pkg, false)
		if src == "" || !strings.Contains(src, "package main") {
			return []string{fmt.Sprintf("go run: package %s does not exist or is not a command", pkg)}
		}
		rest := args[2:]
		for i := 0; i < len(rest); i++ {
			a := rest[i]
			if !strings.HasPrefix(a, "-") {
				if !strings.Contains(src, `"`+a+`"`) {
					bad("go run %s: argument %q is not one the command knows", pkg, a)
				}
				continue
			}
			name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			def := regexp.MustCompile(`\.(\w+)\((?:&[\w.]+, )?"` + regexp.QuoteMeta(name) + `"`).FindStringSubmatch(src)
			if def == nil {
				bad("go run %s: flag %q is not defined by the command", pkg, name)
				if !hasValue && i+1 < len(rest) && !strings.HasPrefix(rest[i+1], "-") {
					i++ // its value, most likely
				}
				continue
			}
			if !hasValue && !strings.HasPrefix(def[1], "Bool") {
				i++ // its value
			}
		}
	case "test":
		var run string
		for i := 1; i < len(args); i++ {
			a := args[i]
			switch {
			case a == "-run" && i+1 < len(args):
				run = args[i+1]
				i++
			case strings.HasPrefix(a, "-"):
			default:
				src := c.packageSource(a, true)
				if src == "" {
					bad("go test: package %s does not exist", a)
					continue
				}
				if run == "" {
					continue
				}
				re, err := regexp.Compile(run)
				if err != nil {
					bad("go test -run %q: %v", run, err)
					continue
				}
				matched := false
				for _, m := range regexp.MustCompile(`(?m)^func (Test\w+)\(`).FindAllStringSubmatch(src, -1) {
					matched = matched || re.MatchString(m[1])
				}
				if !matched {
					bad("go test -run %q matches no test of %s", run, a)
				}
			}
		}
	default:
		bad("go %s: the README test has no check for it; add one", args[0])
	}
	return problems
}

// packageSource is the Go source of the package in dir (with its tests when tests is set),
// or "" when there is none.
func (c *commandChecker) packageSource(dir string, tests bool) string {
	files, _ := filepath.Glob(filepath.Join(c.root, dir, "*.go"))
	var b strings.Builder
	for _, f := range files {
		if !tests && strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err == nil {
			b.Write(src)
		}
	}
	return b.String()
}

// checkCompose checks `docker compose [-f file] [--profile p] up [--build] [-d]`.
func (c *commandChecker) checkCompose(args []string) []string {
	if len(args) == 0 || args[0] != "compose" {
		return []string{fmt.Sprintf("docker %v: the README test has no check for it; add one", args)}
	}
	var problems []string
	file, profiles, sub := "docker-compose.yml", []string{}, ""
	for i := 1; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-f" && i+1 < len(args):
			file = args[i+1]
			i++
		case a == "--profile" && i+1 < len(args):
			profiles = append(profiles, args[i+1])
			i++
		case sub == "" && !strings.HasPrefix(a, "-"):
			sub = a
		case sub == "up" && (a == "--build" || a == "-d"):
		default:
			problems = append(problems, fmt.Sprintf("docker compose: %q is not checked by the README test; add it", a))
		}
	}
	if sub != "up" {
		problems = append(problems, fmt.Sprintf("docker compose %s: the README test has no check for it; add one", sub))
	}
	b, err := os.ReadFile(filepath.Join(c.root, file))
	if err != nil {
		return append(problems, fmt.Sprintf("docker compose -f %s: no such file", file))
	}
	for _, p := range profiles {
		if !regexp.MustCompile(`(?m)^\s+profiles: \[[^\]]*\b` + regexp.QuoteMeta(p) + `\b`).Match(b) {
			problems = append(problems, fmt.Sprintf("docker compose: profile %q is not in %s", p, file))
		}
	}
	return problems
}

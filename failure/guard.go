package failure

import (
	"fmt"
	"math"
	"path"
	"slices"
	"sync"
	"time"

	"github.com/baton-dev/baton/bridge"
	"github.com/baton-dev/baton/spend"
)

// Structured refusals (DESIGN §7).
//
// Design note: the Guard stands between the model's tool calls and their dispatch. It
// refuses a call with a [RETRY:<code>] signal whose JSON says why, how it can be resolved
// and which tools the model may call now: policy_deny (per-agent and per-tool allow/deny
// lists), rate_exceeded (per-tool rate limits, shared by every run of the coordinator) and
// budget_exceeded (per-run budget of tool calls and tokens). A refused call is never sent
// and consumes nothing. Budget usage lives in the run's State so that it survives
// suspension; rate-limit windows live in a RateLimiter shared by the engine.

// Resolution types of policy refusals.
const (
	ResolutionUseOtherTool = "use_other_tool"
	ResolutionHandoff      = "handoff"
	ResolutionWait         = "wait"
)

// AccessList is an allow/deny list of tool names, as the model sees them. Entries may be
// path.Match patterns ("files__*"). An empty Allow allows everything; Deny wins over
// Allow.
type AccessList struct {
	Allow []string
	Deny  []string
}

// permits reports whether name passes the list.
func (a AccessList) permits(name string) bool {
	if matchAny(a.Deny, name) {
		return false
	}
	return len(a.Allow) == 0 || matchAny(a.Allow, name)
}

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if p == name {
			return true
		}
		if ok, err := path.Match(p, name); err == nil && ok {
			return true
		}
	}
	return false
}

// RateLimit allows at most MaxCalls calls of Tool in any window of Per.
type RateLimit struct {
	Tool     string
	MaxCalls int
	Per      time.Duration
}

// Budget bounds one run; 0 means no limit.
type Budget struct {
	MaxToolCalls int
	MaxTokens    int
	// MaxCostUSD bounds the run's model cost (policy.budget.max_cost_usd).
	MaxCostUSD float64
	// WarnAt is the share of a limit past which the run is warned (0: never).
	WarnAt float64
	// GivenTokens and GivenCostUSD mark a limit the run's caller gave it (a calling
	// Baton's baton/budget, smaller than the operator's): its refusal names the caller's
	// budget, not a config key this Baton's operator could raise.
	GivenTokens, GivenCostUSD bool
}

// GuardPolicy is the config's policy section.
type GuardPolicy struct {
	// Agents applies to sub-agent tools, Tools to every other backend tool (MCP tools,
	// <server>__<tool>).
	Agents     AccessList
	Tools      AccessList
	RateLimits []RateLimit
	Budget     Budget
}

// BudgetUsage is what a run has used of its budget.
type BudgetUsage struct {
	ToolCalls int `json:"tool_calls"`
	Tokens    int `json:"tokens"`
	// InputTokens, OutputTokens and CostUSD are the run's model usage (Tokens is their
	// token sum).
	InputTokens  int64   `json:"input_tokens,omitempty"`
	OutputTokens int64   `json:"output_tokens,omitempty"`
	CostUSD      float64 `json:"cost_usd,omitempty"`
}

// RateLimiter keeps sliding windows of calls per tool. One is shared by every run of the
// engine; it is safe for concurrent use.
type RateLimiter struct {
	mu     sync.Mutex
	limits map[string]RateLimit
	calls  map[string][]time.Time
}

// NewRateLimiter builds a limiter for limits; entries with MaxCalls or Per <= 0 are
// ignored.
func NewRateLimiter(limits []RateLimit) *RateLimiter {
	l := &RateLimiter{limits: map[string]RateLimit{}, calls: map[string][]time.Time{}}
	for _, rl := range limits {
		if rl.MaxCalls > 0 && rl.Per > 0 {
			l.limits[rl.Tool] = rl
		}
	}
	return l
}

// Limit returns the rate limit of tool, if any.
func (l *RateLimiter) Limit(tool string) (RateLimit, bool) {
	if l == nil {
		return RateLimit{}, false
	}
	rl, ok := l.limits[tool]
	return rl, ok
}

// Wait returns how long until tool may be called again; 0 when it may be called now.
func (l *RateLimiter) Wait(tool string, now time.Time) time.Duration {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.waitLocked(tool, now)
}

func (l *RateLimiter) waitLocked(tool string, now time.Time) time.Duration {
	rl, ok := l.limits[tool]
	if !ok {
		return 0
	}
	// Drop the calls that left the window.
	calls := l.calls[tool]
	i := 0
	for i < len(calls) && !calls[i].Add(rl.Per).After(now) {
		i++
	}
	calls = calls[i:]
	l.calls[tool] = calls
	if len(calls) < rl.MaxCalls {
		return 0
	}
	return calls[len(calls)-rl.MaxCalls].Add(rl.Per).Sub(now)
}

// Take records a call of tool at now if the limit allows it; otherwise it returns the wait.
func (l *RateLimiter) Take(tool string, now time.Time) (wait time.Duration, ok bool) {
	if l == nil {
		return 0, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if w := l.waitLocked(tool, now); w > 0 {
		return w, false
	}
	if _, limited := l.limits[tool]; limited {
		l.calls[tool] = append(l.calls[tool], now)
	}
	return 0, true
}

// GuardConfig configures the Guard of one run.
type GuardConfig struct {
	Policy GuardPolicy
	// SharedPolicy, when set, is used instead of Policy and must not change while the
	// guard is in use: an engine's runs share its policy rather than each retaining a
	// copy.
	SharedPolicy *GuardPolicy
	// Limiter is shared by the engine's runs; nil builds one from Policy.RateLimits for
	// this guard alone.
	Limiter *RateLimiter
	// Agents lists the sub-agent tool names (Policy.Agents applies to them).
	Agents []string
	// Tools lists every backend tool name the guard governs, agents included, and denied
	// tools included (so that a call to one is refused as policy_deny, not unknown).
	Tools []string
	// Always lists names that are never refused and always valid: ask_user and the
	// frontend tools.
	Always []string
	// Used is the run's budget usage to continue from and to update (for example
	// &State.Budget); nil starts from zero.
	Used *BudgetUsage
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Guard refuses tool calls that the policy does not allow. It is safe for concurrent use,
// but Used must not be touched by anyone else while the run goes on.
type Guard struct {
	mu      sync.Mutex
	policy  *GuardPolicy
	limiter *RateLimiter
	agents  []string // sorted: a run's guard retains a slice, smaller than a map
	tools   []string
	always  []string
	used    *BudgetUsage
	now     func() time.Time
}

// NewGuard builds the guard of one run.
func NewGuard(cfg GuardConfig) *Guard {
	g := &Guard{
		policy:  cfg.SharedPolicy,
		limiter: cfg.Limiter,
		agents:  slices.Sorted(slices.Values(cfg.Agents)),
		tools:   slices.Sorted(slices.Values(slices.Clone(cfg.Tools))),
		always:  slices.Clone(cfg.Always),
		used:    cfg.Used,
		now:     cfg.Now,
	}
	g.tools = slices.Compact(g.tools)
	if g.policy == nil {
		p := cfg.Policy
		g.policy = &p
	}
	if g.limiter == nil {
		g.limiter = NewRateLimiter(g.policy.RateLimits)
	}
	if g.used == nil {
		g.used = &BudgetUsage{}
	}
	if g.now == nil {
		g.now = time.Now
	}
	return g
}

// Permitted reports whether the allow/deny lists let the model call name. Use it to leave
// denied tools out of the toolset offered to the model.
func (g *Guard) Permitted(name string) bool {
	if slices.Contains(g.always, name) {
		return true
	}
	if g.isAgent(name) {
		return g.policy.Agents.permits(name)
	}
	return g.policy.Tools.permits(name)
}

func (g *Guard) isAgent(name string) bool {
	_, found := slices.BinarySearch(g.agents, name)
	return found
}

func (g *Guard) governs(name string) bool {
	_, found := slices.BinarySearch(g.tools, name)
	return found && !slices.Contains(g.always, name)
}

// Check decides whether the call of name may be sent. When it may, the call is counted
// against the budget and the rate limit, and ok is true. Otherwise refusal is the tool
// result ([RETRY:policy_deny|budget_exceeded|rate_exceeded] {json}); DetectToolResult
// turns it into a policy_violation. Names the guard does not govern (unknown tools,
// ask_user, frontend tools) are always ok.
func (g *Guard) Check(name string) (refusal string, ok bool) {
	sig, ok := g.CheckSignal(name)
	if ok {
		return "", true
	}
	return bridge.Retry(sig), false
}

// CheckSignal is Check with the refusal as a signal, for the engine to render once.
func (g *Guard) CheckSignal(name string) (refusal bridge.Signal, ok bool) {
	if !g.governs(name) {
		return bridge.Signal{}, true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	if !g.Permitted(name) {
		valid := g.validLocked(now, "")
		res := bridge.Resolution{Type: ResolutionHandoff}
		msg := "The coordinator's policy does not allow calling the tool %q."
		if g.isAgent(name) {
			msg = "The coordinator's policy does not allow delegating to the sub-agent %q."
		}
		msg = fmt.Sprintf(msg, name)
		if g.anyGoverned(valid) {
			res.Type = ResolutionUseOtherTool
			msg += " Use one of valid_next_actions instead."
		}
		return bridge.Signal{Code: "policy_deny", Requested: name, Message: msg, ValidNextActions: valid, Resolution: &res}, false
	}
	if why := g.exhaustedLocked(); why != "" {
		res := &bridge.Resolution{Type: ResolutionHandoff}
		if ex := g.overLocked(); ex != nil {
			res.Raise = ex.Raise()
		}
		return bridge.Signal{
			Code: "budget_exceeded", Requested: name,
			Message:          why + " No more tool calls can be made in this run: answer with what you have.",
			ValidNextActions: g.validLocked(now, ""),
			Resolution:       res,
		}, false
	}
	if wait, allowed := g.limiter.Take(name, now); !allowed {
		secs := math.Ceil(wait.Seconds())
		rl, _ := g.limiter.Limit(name)
		resets := now.Add(time.Duration(secs) * time.Second).UTC().Format(time.RFC3339)
		return bridge.Signal{
			Code: "rate_exceeded", Requested: name,
			Message: fmt.Sprintf("The tool %q may be called at most %d times per %s; it can be called again in %gs.",
				name, rl.MaxCalls, rl.Per, secs),
			ValidNextActions: g.validLocked(now, name),
			Resolution:       &bridge.Resolution{Type: ResolutionWait, RetryAfterSeconds: secs, ResetsAt: resets},
		}, false
	}
	g.used.ToolCalls++
	return bridge.Signal{}, true
}

// anyGoverned reports whether names holds a tool the guard governs (not only ask_user and
// frontend tools).
func (g *Guard) anyGoverned(names []string) bool {
	return slices.ContainsFunc(names, g.governs)
}

// AddTokens adds the tokens of an LLM turn to the budget. It returns a policy_violation
// once the token budget is spent (the run cannot afford another LLM call), nil while it
// lasts. The tool-call budget is enforced by Check.
func (g *Guard) AddTokens(n int) *Failure {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.used.Tokens += max(n, 0)
	return g.exceededLocked()
}

// exceededLocked is the policy_violation of a spent token or cost budget, nil while both
// last.
func (g *Guard) exceededLocked() *Failure {
	if ex := g.overLocked(); ex != nil {
		return &Failure{Kind: KindPolicyViolation, Code: "RETRY:budget_exceeded", Explanation: ex.Message()}
	}
	return nil
}

// AddUsage adds a model call's usage (tokens and cost) to the run's budget. It returns
// the warnings the call crossed (once per unit: only the call that passes warn_at warns)
// and, once the token or cost budget is spent, the policy_violation that stops the run
// before its next model call.
func (g *Guard) AddUsage(u spend.Usage) ([]spend.Warning, *Failure) {
	g.mu.Lock()
	defer g.mu.Unlock()
	before := g.spentLocked()
	g.used.InputTokens += u.InputTokens
	g.used.OutputTokens += u.OutputTokens
	g.used.CostUSD += u.CostUSD
	g.used.Tokens += int(u.Tokens())
	warnings, _ := spend.Crossed(spend.BudgetRun, before, g.spentLocked(), g.limits(), g.policy.Budget.WarnAt)
	return warnings, g.exceededLocked()
}

// Spent is the run's model usage so far.
func (g *Guard) Spent() spend.Usage {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.spentLocked()
}

func (g *Guard) spentLocked() spend.Usage {
	u := spend.Usage{InputTokens: g.used.InputTokens, OutputTokens: g.used.OutputTokens, CostUSD: g.used.CostUSD}
	if extra := int64(g.used.Tokens) - u.Tokens(); extra > 0 {
		// Tokens counted by AddTokens alone (no split): counted as input.
		u.InputTokens += extra
	}
	return u
}

func (g *Guard) limits() spend.Limits {
	b := g.policy.Budget
	return spend.Limits{Tokens: int64(b.MaxTokens), CostUSD: b.MaxCostUSD}
}

// Over is the token or cost budget the run has spent, nil when none.
func (g *Guard) Over() *spend.Exceeded {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.overLocked()
}

// overLocked is the token or cost budget the run has spent, nil when none.
func (g *Guard) overLocked() *spend.Exceeded {
	ex := spend.Over(spend.BudgetRun, g.spentLocked(), g.limits())
	if ex != nil {
		b := g.policy.Budget
		ex.Given = ex.Unit == spend.UnitUSD && b.GivenCostUSD || ex.Unit == spend.UnitTokens && b.GivenTokens
	}
	return ex
}

func (g *Guard) exhaustedLocked() string {
	b, u := g.policy.Budget, g.used
	if ex := g.overLocked(); ex != nil {
		return ex.Message()
	}
	switch {
	case b.MaxToolCalls > 0 && u.ToolCalls >= b.MaxToolCalls:
		return fmt.Sprintf("This run has used its budget of %d tool calls.", b.MaxToolCalls)
	}
	return ""
}

// Used returns the budget usage so far.
func (g *Guard) Used() BudgetUsage {
	g.mu.Lock()
	defer g.mu.Unlock()
	return *g.used
}

// ValidNextActions lists, sorted, the tools the model may call now: the Always names and
// every governed tool that is permitted, not rate limited and within the budget. Use it
// for valid_next_actions in every refusal and retry signal.
func (g *Guard) ValidNextActions() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.validLocked(g.now(), "")
}

func (g *Guard) validLocked(now time.Time, blocked string) []string {
	out := slices.Clone(g.always)
	if g.exhaustedLocked() == "" {
		for _, t := range g.tools {
			if t == blocked || slices.Contains(g.always, t) || !g.Permitted(t) || g.limiter.Wait(t, now) > 0 {
				continue
			}
			out = append(out, t)
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if out == nil {
		out = []string{}
	}
	return out
}

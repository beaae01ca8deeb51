package coordinator

// The failure model lives in package failure (it knows nothing of Run); these aliases keep
// the engine's exported names, used by cmd/ and the integration tests, working.

import "github.com/baton-dev/baton/failure"

// FailureKind is failure.Kind.
type FailureKind = failure.Kind

// FailureState is failure.State.
type FailureState = failure.State

// AccessList is failure.AccessList.
type AccessList = failure.AccessList

// Action is failure.Action.
type Action = failure.Action

// Budget is failure.Budget.
type Budget = failure.Budget

// BudgetUsage is failure.BudgetUsage.
type BudgetUsage = failure.BudgetUsage

// Corrective is failure.Corrective.
type Corrective = failure.Corrective

// Decision is failure.Decision.
type Decision = failure.Decision

// DefaultPolicy is failure.DefaultPolicy.
type DefaultPolicy = failure.DefaultPolicy

// Failure is failure.Failure.
type Failure = failure.Failure

// Guard is failure.Guard.
type Guard = failure.Guard

// GuardConfig is failure.GuardConfig.
type GuardConfig = failure.GuardConfig

// GuardPolicy is failure.GuardPolicy.
type GuardPolicy = failure.GuardPolicy

// Lesson is failure.Lesson.
type Lesson = failure.Lesson

// LoopConfig is failure.LoopConfig.
type LoopConfig = failure.LoopConfig

// LoopDetector is failure.LoopDetector.
type LoopDetector = failure.LoopDetector

// Policy is failure.Policy.
type Policy = failure.Policy

// RateLimit is failure.RateLimit.
type RateLimit = failure.RateLimit

// RateLimiter is failure.RateLimiter.
type RateLimiter = failure.RateLimiter

// ToolResult is failure.ToolResult.
type ToolResult = failure.ToolResult

// TurnLimits is failure.TurnLimits.
type TurnLimits = failure.TurnLimits

// TurnState is failure.TurnState.
type TurnState = failure.TurnState

// Constants of the failure model (see package failure).
const (
	KindTransientProvider  = failure.KindTransientProvider
	KindOutputTruncated    = failure.KindOutputTruncated
	KindOutputRefused      = failure.KindOutputRefused
	KindToolError          = failure.KindToolError
	KindNoProgress         = failure.KindNoProgress
	KindLoopDetected       = failure.KindLoopDetected
	KindCapabilityGap      = failure.KindCapabilityGap
	KindPolicyViolation    = failure.KindPolicyViolation
	KindAmbiguousInput     = failure.KindAmbiguousInput
	KindIterationLimit     = failure.KindIterationLimit
	KindTimeLimit          = failure.KindTimeLimit
	ActionRetry            = failure.ActionRetry
	ActionNarrowScope      = failure.ActionNarrowScope
	ActionAskUser          = failure.ActionAskUser
	ActionHandoff          = failure.ActionHandoff
	ActionStop             = failure.ActionStop
	ResolutionUseOtherTool = failure.ResolutionUseOtherTool
	ResolutionHandoff      = failure.ResolutionHandoff
	ResolutionWait         = failure.ResolutionWait
	DefaultLoopSoft        = failure.DefaultLoopSoft
	DefaultLoopHard        = failure.DefaultLoopHard
	DefaultStallTurns      = failure.DefaultStallTurns
	DefaultBackoffBase     = failure.DefaultBackoffBase
	DefaultBackoffCap      = failure.DefaultBackoffCap
)

// Functions of the failure model (see package failure).
var (
	FailureKinds        = failure.Kinds
	CallSignature       = failure.CallSignature
	CanonicalArgs       = failure.CanonicalArgs
	ErrorSignature      = failure.ErrorSignature
	IsProgress          = failure.IsProgress
	LoopRefusal         = failure.LoopRefusal
	LoopSignal          = failure.LoopSignal
	PendingWork         = failure.PendingWork
	WithAddendum        = failure.WithAddendum
	MostSevere          = failure.MostSevere
	ClassifyCompletion  = failure.ClassifyCompletion
	ClassifyModelError  = failure.ClassifyModelError
	DetectBeforeTurn    = failure.DetectBeforeTurn
	DetectToolResult    = failure.DetectToolResult
	DetectAgentQuestion = failure.DetectAgentQuestion
	DetectTurn          = failure.DetectTurn
	NewGuard            = failure.NewGuard
	NewRateLimiter      = failure.NewRateLimiter
)

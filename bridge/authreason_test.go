package bridge

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/baton-dev/baton/subagent"
)

type reasonedAuth struct{}

func (reasonedAuth) Error() string  { return "exchange failed: secret detail" }
func (reasonedAuth) Unwrap() error  { return subagent.ErrAuth }
func (reasonedAuth) Reason() string { return "the user must sign in again." }

// TestAuthRequiredReason: an ErrAuth that carries a Reason (a call not sent because the
// user's token could not be exchanged) is [AUTH_REQUIRED] with that reason, not the
// error's text.
func TestAuthRequiredReason(t *testing.T) {
	out := FromA2AError("research", subagent.Request{Prompt: "hi"}, reasonedAuth{}, nil)
	assert.True(t, strings.HasPrefix(out, "[AUTH_REQUIRED:task_id=none]\n"), out)
	assert.Contains(t, out, "was not called: the user must sign in again.")
	assert.NotContains(t, out, "secret detail")
	tag, _ := A2AErrorTag(reasonedAuth{})
	assert.Equal(t, TagAuthRequired, tag)
}

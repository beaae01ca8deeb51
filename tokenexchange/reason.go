package tokenexchange

import (
	"errors"
	"strings"
)

// Reason is a plain sentence about a failed exchange for the model and the user: what
// happened and what can be done about it. It holds no token material.
func Reason(err error) string {
	switch {
	case errors.Is(err, ErrNoSubject):
		return "Baton holds no valid sign-in of this user with the identity provider (it expired, or the user did not sign in with it): the user must sign in again; retrying before that fails the same way."
	case errors.Is(err, ErrRefused):
		code := ""
		if i := strings.LastIndex(err.Error(), "("); i >= 0 {
			code = " (" + strings.TrimSuffix(err.Error()[i+1:], ")") + ")"
		}
		return "the identity provider refused to issue a token for this user" + code + ": the user may not be allowed to use it; do not retry unchanged."
	case errors.Is(err, ErrRedirected):
		return "the identity provider's token endpoint answered with a redirect, which Baton never follows (it would re-send the user's token elsewhere): the token endpoint in Baton's configuration must be the final address; retrying fails the same way."
	case errors.Is(err, ErrUnavailable):
		return "the identity provider could not be reached to obtain the user's token; try again later."
	}
	return "the user's token for it could not be obtained."
}

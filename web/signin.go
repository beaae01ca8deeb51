package web

import (
	"errors"
	"fmt"
	"html"
	"net/url"
	"regexp"
	"strings"
)

// ErrSignIn is wrapped by NewSignIn's errors.
var ErrSignIn = errors.New("web: page sign-in")

// SignIn is what the page needs to sign its user in with an OpenID provider: the issuer
// (whose discovery document names the authorization and token endpoints) and the public
// client id the provider registered for the page. Build it with NewSignIn.
type SignIn struct {
	issuer   string
	clientID string
	origin   string // the issuer's scheme://host[:port], added to connect-src
}

// hostPort is what an origin's host may be in the Content-Security-Policy: a DNS name or
// an IP literal with an optional port; anything else (a ';' or ',', say) would let the
// issuer write directives of its own into the policy.
var hostPort = regexp.MustCompile(`^(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$`)

// clientIDChars are the characters a client id may have here (RFC 6749 allows any
// printable ASCII; the page only ever puts it into a URL query and an HTML attribute,
// both escaped, but a control character is a configuration mistake worth refusing).
var clientIDChars = regexp.MustCompile(`^[\x21-\x7e]{1,255}$`)

// NewSignIn checks issuer (an http or https URL without query or fragment) and clientID
// and returns the page's sign-in settings.
func NewSignIn(issuer, clientID string) (*SignIn, error) {
	u, err := url.Parse(issuer)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.User != nil || u.RawQuery != "" || u.Fragment != "" || !hostPort.MatchString(u.Host) {
		return nil, fmt.Errorf("%w: the issuer must be an http(s) URL without credentials, query or fragment (got %q)", ErrSignIn, issuer)
	}
	if !clientIDChars.MatchString(clientID) {
		return nil, fmt.Errorf("%w: the client id must be 1 to 255 printable ASCII characters", ErrSignIn)
	}
	return &SignIn{issuer: issuer, clientID: clientID, origin: strings.ToLower(u.Scheme + "://" + u.Host)}, nil
}

// charsetMeta is where the page's injected elements (sign-in, MCP) go: right after the
// charset, before any script.
var charsetMeta = []byte(`<meta charset="utf-8">` + "\n")

// inject returns the page with the sign-in element.
func (s *SignIn) inject(page []byte) []byte {
	el := fmt.Sprintf(`<meta name="baton-oidc" data-issuer="%s" data-client-id="%s">`+"\n",
		html.EscapeString(s.issuer), html.EscapeString(s.clientID))
	return withHeadElement(page, el)
}

// policy is ContentSecurityPolicy with the issuer's origin allowed in connect-src.
func (s *SignIn) policy() string {
	return strings.Replace(ContentSecurityPolicy, "connect-src 'self';", "connect-src 'self' "+s.origin+";", 1)
}

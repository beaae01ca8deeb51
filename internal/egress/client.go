package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// ErrRedirect is wrapped by the error of a refused redirect.
var ErrRedirect = errors.New("egress: redirect not allowed")

// maxRedirects bounds a chain of redirects (net/http's default is 10; metadata and token
// endpoints have no reason for more than a few).
const maxRedirects = 5

// DialFunc is the signature of http.Transport.DialContext.
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// ClientOptions tune NewClient.
type ClientOptions struct {
	// Timeout bounds each request, redirects included (default 30 s).
	Timeout time.Duration
	// Dial replaces the guarded dialer's DialContext; it receives the guarded one to call.
	// Tests use it to resolve a made-up public host name to a local server, which a real
	// resolver would do for a real one.
	Dial func(guarded DialFunc) DialFunc
}

// NewClient returns an HTTP client for the requests that belong to one peer (its OAuth
// metadata, registration, token and token-exchange endpoints): every dial goes through p
// (Control), and every redirect hop is checked again before it is followed: no https→http
// downgrade, no scheme but http(s), no IP literal p refuses, at most maxRedirects hops.
// The dial check alone would catch a redirect to a forbidden address; checking the hop
// first also refuses before any connection and names the reason.
func NewClient(p Policy, o ClientOptions) *http.Client {
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: Control(p)}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// A proxy from the environment would make the dial check see the proxy's address, not
	// the peer's: requests a peer chose go direct.
	tr.Proxy = nil
	tr.DialContext = d.DialContext
	if o.Dial != nil {
		tr.DialContext = o.Dial(d.DialContext)
	}
	return &http.Client{Transport: tr, Timeout: o.Timeout, CheckRedirect: CheckRedirect(p)}
}

// CheckRedirect returns an http.Client CheckRedirect function enforcing p on every hop.
func CheckRedirect(p Policy) func(req *http.Request, via []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if len(via) >= maxRedirects {
			return fmt.Errorf("%w: more than %d redirects", ErrRedirect, maxRedirects)
		}
		if err := p.CheckURL(req.URL); err != nil {
			return err
		}
		if prev := via[len(via)-1].URL; prev.Scheme == "https" && req.URL.Scheme != "https" {
			return fmt.Errorf("%w: https to %s downgrade", ErrRedirect, req.URL.Scheme)
		}
		return nil
	}
}

// CheckURL refuses a URL p would not let a request reach, as far as the URL shows: a
// scheme other than http(s), "localhost" or an IP literal p does not allow. Host names are
// checked at dial time, on the address they resolve to.
func (p Policy) CheckURL(u *url.URL) error {
	if u == nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: not an http(s) URL", ErrForbidden)
	}
	h := u.Hostname()
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		if !p.AllowPrivate {
			return fmt.Errorf("%w: %s", ErrForbidden, h)
		}
		return nil
	}
	if ip, err := netip.ParseAddr(h); err == nil && !p.Allows(ip) {
		return fmt.Errorf("%w: %s", ErrForbidden, ip)
	}
	return nil
}

// ForPeer is the policy for the dials that belong to a peer configured at these URLs:
// loopback and private addresses are allowed only when one of them is on such an address.
// Each peer gets its own: one peer on a private address must not open private addresses
// to the metadata of every other peer.
func ForPeer(urls ...string) Policy {
	for _, u := range urls {
		if u != "" && IsPrivateHost(u) {
			return Policy{AllowPrivate: true}
		}
	}
	return Policy{}
}

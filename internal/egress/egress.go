// Package egress guards the connections Baton opens to addresses a peer chose: the OAuth
// metadata, registration and token endpoints that an MCP server or an agent card names are
// untrusted (DESIGN §5), and without a guard a hostile server could point Baton's sign-in
// client at a cloud metadata service or an internal host (SSRF).
//
// The guard works at dial time, on the address actually connected to, so that a host name
// that resolves to a forbidden address and a redirect to one are refused alike:
//
//	d := &net.Dialer{Control: egress.Control(egress.Policy{AllowPrivate: false})}
//	tr.DialContext = d.DialContext
package egress

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"syscall"
)

// ErrForbidden is wrapped by the dial error of a refused address.
var ErrForbidden = errors.New("egress: address not allowed")

// Policy says which addresses besides public ones may be dialled.
type Policy struct {
	// AllowPrivate admits loopback and private addresses (RFC 1918, RFC 4193): set when the
	// operator configured a peer on such an address, so its authorization server may be
	// there too. Link-local (cloud metadata), unspecified and multicast addresses are
	// refused whatever the policy.
	AllowPrivate bool
}

// Control returns a net.Dialer Control function that refuses what p does not allow.
func Control(p Policy) func(network, address string, _ syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return fmt.Errorf("%w: %s", ErrForbidden, address)
		}
		ip, err := netip.ParseAddr(host)
		if err != nil {
			return fmt.Errorf("%w: %s", ErrForbidden, address)
		}
		if !p.Allows(ip) {
			return fmt.Errorf("%w: %s", ErrForbidden, ip)
		}
		return nil
	}
}

// Allows reports whether p admits ip.
func (p Policy) Allows(ip netip.Addr) bool {
	ip = ip.Unmap()
	switch {
	case !ip.IsValid(), ip.IsUnspecified(), ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast(),
		ip.IsInterfaceLocalMulticast(), ip.IsMulticast():
		return false
	case ip.IsLoopback(), ip.IsPrivate():
		return p.AllowPrivate
	}
	return true
}

// IsPrivateHost reports whether the URL's host is loopback or private: "localhost", or an
// IP literal in those ranges. Names are not resolved (the answer could change by the time
// they are dialled); an operator who configures an internal peer by name and needs its
// authorization server reached sets the policy explicitly.
func IsPrivateHost(rawURL string) bool {
	u, err := url.Parse(rawURL)
	if err != nil {
		return false
	}
	h := u.Hostname()
	if h == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(h)
	if err != nil {
		return false
	}
	ip = ip.Unmap()
	return ip.IsLoopback() || ip.IsPrivate()
}

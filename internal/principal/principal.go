// Package principal carries the authenticated caller of a request in its context, from the
// HTTP surface (package server, which authenticates) to protocol handlers that it mounts
// (package a2aserver), without either importing the other.
package principal

import "context"

type key struct{}

// With returns ctx carrying the principal id who ("" is the anonymous principal of a
// deployment without auth).
func With(ctx context.Context, who string) context.Context {
	return context.WithValue(ctx, key{}, who)
}

// From returns the principal carried by ctx, and whether ctx carries one at all: a request
// that did not pass the server's authentication has none.
func From(ctx context.Context) (who string, ok bool) {
	who, ok = ctx.Value(key{}).(string)
	return who, ok
}

package tokenexchange

import (
	"context"
	"strconv"
	"testing"
)

// BenchmarkToken compares a cache hit with an exchange that misses the cache (a loopback
// RFC 8693 server): what the cache saves per call to a peer in mode exchange.
func BenchmarkToken(b *testing.B) {
	a := newAS(b)
	subs := &subjects{m: map[string]string{}}
	for i := range 1000 {
		subs.m["p"+strconv.Itoa(i)] = "s" + strconv.Itoa(i)
	}
	tg := &Target{TokenURL: a.URL, Audience: "tools", ClientID: "baton", ClientSecret: "baton-secret"}
	ctx := context.Background()
	b.Run("cached", func(b *testing.B) {
		x := New(Config{Subjects: subs})
		if _, err := x.Token(ctx, "p0", tg); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := x.Token(ctx, "p0", tg); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("exchange", func(b *testing.B) {
		x := New(Config{Subjects: subs, MaxEntries: 1})
		i := 0
		for b.Loop() {
			// Alternating principals with a one-entry cache: every call exchanges.
			if _, err := x.Token(ctx, "p"+strconv.Itoa(i%2), tg); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

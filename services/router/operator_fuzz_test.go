package router

import (
	"crypto/sha256"
	"strings"
	"testing"
)

// FuzzBearer: whatever a client puts in its authorization header, the
// check neither panics nor accepts anything but "Bearer" (any case) and
// the token, with white space around.
func FuzzBearer(f *testing.F) {
	const token = "0123456789abcdef0123456789abcdef"
	sum := sha256.Sum256([]byte(token))
	a := &operatorAuth{token: &sum}
	for _, s := range []string{"", "Bearer " + token, "bearer  " + token + " ", "Basic " + token, token, "Bearer", "Bearer \x00", strings.Repeat("B", 1<<16)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, auth string) {
		got := a.bearerOK(auth)
		scheme, tok, ok := strings.Cut(strings.TrimSpace(auth), " ")
		want := ok && strings.EqualFold(scheme, "bearer") && strings.TrimSpace(tok) == token
		if got != want {
			t.Fatalf("bearerOK(%q) = %v, want %v", auth, got, want)
		}
	})
}

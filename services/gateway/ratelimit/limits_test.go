package ratelimit

import "testing"

func TestShare(t *testing.T) {
	got := share(Limits{RequestsPerMinute: 60, InputTokensPerMinute: 2, TokensPerDay: 1000}, 3)
	want := Limits{RequestsPerMinute: 20, InputTokensPerMinute: 1, TokensPerDay: 333}
	if got != want {
		t.Errorf("share = %+v, want %+v", got, want)
	}
}

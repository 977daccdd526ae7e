package bus

import "testing"

func TestToken(t *testing.T) {
	cases := map[string]string{
		"":           "_",
		"team-a":     "team-a",
		"a.b":        "a_b",
		"x*":         "x_",
		"a>b":        "a_b",
		"sp ace":     "sp_ace",
		"tab\there":  "tab_here",
		"ünï":        "__n__", // non-ASCII bytes each become _
		"ok_1-2:3@4": "ok_1-2:3@4",
	}
	for in, want := range cases {
		if got := Token(in); got != want {
			t.Errorf("Token(%q) = %q, want %q", in, got, want)
		}
	}
	if got := UsageSubject("a.b"); got != "switchyard.v1.usage.a_b" {
		t.Errorf("UsageSubject = %q", got)
	}
}

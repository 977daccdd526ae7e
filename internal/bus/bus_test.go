package bus

import (
	"strings"
	"testing"
)

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

func TestKVKeysAreValidAndDistinct(t *testing.T) {
	valid := func(k string) bool {
		for i := 0; i < len(k); i++ {
			c := k[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-/_=.", c) >= 0) {
				return false
			}
		}
		return k != "" && k[0] != '.' && k[len(k)-1] != '.'
	}
	seen := map[string][2]string{}
	for _, pw := range [][2]string{{"default", "sim-0"}, {"a.b", "c"}, {"a_b", "c"}, {"a", "b.c"}, {"p:1", "w 2"}, {"", "x"}, {"ü", "*"}} {
		k := KVLeaseKey(pw[0], pw[1])
		if !valid(k) {
			t.Errorf("KVLeaseKey(%q, %q) = %q: not a valid NATS KV key", pw[0], pw[1], k)
		}
		if prev, dup := seen[k]; dup {
			t.Errorf("KVLeaseKey collision: %v and %v → %q", prev, pw, k)
		}
		seen[k] = pw
	}
	if k := KVReplicaKey("host.name:1"); !valid(k) || !strings.HasPrefix(k, "=replicas.") {
		t.Errorf("KVReplicaKey = %q", k)
	}
}

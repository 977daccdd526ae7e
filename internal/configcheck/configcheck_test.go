package configcheck

import (
	"strings"
	"testing"
	"time"
)

func TestURLListNeverLeaksCredentials(t *testing.T) {
	tests := []struct {
		list    string
		schemes []string
		wantErr string
	}{
		{"nats://127.0.0.1:4222", NATSSchemes, ""},
		{"nats://a:4222, tls://b:4222", NATSSchemes, ""},
		{"redis://:secret@127.0.0.1:6379/0", RedisSchemes, ""},
		{"unix:///var/run/redis.sock", RedisSchemes, ""},
		{"http://user:secret@host:1", NATSSchemes, "scheme must be one of nats"},
		{"nats://user:secret@:4222", NATSSchemes, "no host"},
		{"nats://user:secret@host:bad port", NATSSchemes, "not a valid URL"},
		{"nats://tok3n@host:4222,redis://x", NATSSchemes, "scheme"},
	}
	for _, tc := range tests {
		err := URLList(tc.list, tc.schemes...)
		if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("URLList(%q) = %v, want %q", tc.list, err, tc.wantErr)
		}
		if err != nil && (strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "tok3n")) {
			t.Errorf("URLList(%q) leaks a credential: %v", tc.list, err)
		}
	}
	if got := Redact("nats://u:secret@a:1,nats://tok3n@b:2,nats://c:3"); strings.Contains(got, "secret") || strings.Contains(got, "tok3n") || !strings.Contains(got, "c:3") {
		t.Errorf("Redact = %q", got)
	}
}

func TestListenAddrAndPositive(t *testing.T) {
	for addr, ok := range map[string]bool{":9090": true, "127.0.0.1:0": true, "": false, "9090": false, "h:http": true, "h:nope": false} {
		if err := ListenAddr(addr); (err == nil) != ok {
			t.Errorf("ListenAddr(%q) = %v", addr, err)
		}
	}
	errs := Positive(Duration{"a", time.Second}, Duration{"b", 0}, Duration{"c", -time.Second})
	if len(errs) != 2 || !strings.Contains(errs[0].Error(), "b: must be positive") {
		t.Errorf("Positive = %v", errs)
	}
}

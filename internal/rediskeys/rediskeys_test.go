package rediskeys

import (
	"path"
	"testing"
)

func TestKeysArePrefixedAndMatchTheirPatterns(t *testing.T) {
	k := KVSnapshot("gpu-a", "sim-0")
	if k != "switchyard:kv:snapshot:gpu-a:sim-0" {
		t.Errorf("KVSnapshot = %q", k)
	}
	if ok, _ := path.Match(KVSnapshotPattern, k); !ok {
		t.Errorf("%q does not match %q", k, KVSnapshotPattern)
	}
	if s := KVSummary("p", "w"); s != "switchyard:kv:summary:p:w" {
		t.Errorf("KVSummary = %q", s)
	}
}

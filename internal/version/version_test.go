package version

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestGet(t *testing.T) {
	vcs := func(kv ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/switchyard-dev/switchyard", Version: "v0.0.0-20260101000000-0123456789ab+dirty"}}
		for i := 0; i < len(kv); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return bi
	}
	const rev = "0123456789abcdef0123456789abcdef01234567"
	tests := []struct {
		name                      string
		stampVersion, stampCommit string
		bi                        *debug.BuildInfo
		wantVersion, wantCommit   string
		wantModified              bool
	}{
		{"make build", "v0.4.0-3-g0123456-dirty", rev, vcs("vcs.revision", "ffff", "vcs.modified", "true"), "v0.4.0-3-g0123456-dirty", rev, false},
		{"make build from a source archive", "v0.4.0", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "v0.4.0", "", false},
		{"go build in a checkout", "", "", vcs("vcs.revision", rev, "vcs.modified", "true"), "v0.0.0-20260101000000-0123456789ab+dirty", rev, true},
		{"go install m@version", "", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.4.0"}}, "v0.4.0", "", false},
		{"go run, no VCS info", "", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "(devel)", "", false},
		{"empty module version", "", "", &debug.BuildInfo{}, "(devel)", "", false},
		{"no build info", "", "", nil, "unknown", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := get(tc.stampVersion, tc.stampCommit, tc.bi)
			if got.Version != tc.wantVersion || got.Commit != tc.wantCommit || got.Modified != tc.wantModified {
				t.Errorf("got %+v, want version %q commit %q modified %v", got, tc.wantVersion, tc.wantCommit, tc.wantModified)
			}
			if got.Go != runtime.Version() || got.Platform != runtime.GOOS+"/"+runtime.GOARCH {
				t.Errorf("toolchain %q %q", got.Go, got.Platform)
			}
		})
	}
}

// TestStamp sets the variables as -ldflags -X does and reads them back
// through Get, the path every binary takes.
func TestStamp(t *testing.T) {
	defer func(v, c string) { version, commit = v, c }(version, commit)
	version, commit = "v9.9.9-test", "feedface"
	got := Get()
	if got.Version != "v9.9.9-test" || got.Commit != "feedface" || got.Modified {
		t.Fatalf("Get() = %+v", got)
	}
	if s := got.String(); !strings.HasPrefix(s, "v9.9.9-test (commit feedface, go") {
		t.Fatalf("String() = %q", s)
	}
}

func TestString(t *testing.T) {
	tests := []struct {
		info Info
		want string
	}{
		{Info{Version: "v0.4.0", Commit: "abc", Go: "go1.26.0", Platform: "linux/amd64"}, "v0.4.0 (commit abc, go1.26.0 linux/amd64)"},
		{Info{Version: "(devel)", Commit: "abc", Modified: true, Go: "go1.26.0", Platform: "darwin/arm64"}, "(devel) (commit abc modified, go1.26.0 darwin/arm64)"},
		{Info{Version: "(devel)", Go: "go1.26.0", Platform: "linux/amd64"}, "(devel) (commit unknown, go1.26.0 linux/amd64)"},
	}
	for _, tc := range tests {
		if got := tc.info.String(); got != tc.want {
			t.Errorf("%+v: got %q, want %q", tc.info, got, tc.want)
		}
	}
}

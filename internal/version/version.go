// Package version says which build of Switchyard is running. `make build`
// stamps it with -ldflags -X from git; a binary built by go run, go build or
// go install has no stamp, and the Go toolchain's build info (module
// version, VCS revision) stands in, so what is printed is always true even
// when it is less precise.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set by the linker: the Makefile's build target passes
//
//	-X github.com/switchyard-dev/switchyard/internal/version.version=$(VERSION)
//	-X github.com/switchyard-dev/switchyard/internal/version.commit=$(COMMIT)
var (
	version string
	commit  string
)

// Info describes one build.
type Info struct {
	// Version is the stamped `git describe`, else the module version Go
	// recorded: a tag for go install m@v1.2.3, a pseudo-version or
	// "(devel)" otherwise.
	Version string
	// Commit is the full VCS revision; empty when unknown (no stamp and
	// built without VCS information, e.g. -buildvcs=false or from a
	// source archive).
	Commit string
	// Modified: built from a tree with uncommitted changes. Only Go's build
	// info knows it; a stamped version says "-dirty" itself.
	Modified bool
	// Go is the toolchain that built the binary, e.g. go1.26.0.
	Go string
	// Platform is GOOS/GOARCH.
	Platform string
}

// Get returns this binary's Info.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return get(version, commit, bi)
}

// get prefers the stamp, field by field, over the build info.
func get(stampVersion, stampCommit string, bi *debug.BuildInfo) Info {
	info := Info{Version: stampVersion, Commit: stampCommit, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi == nil {
		if info.Version == "" {
			info.Version = "unknown"
		}
		return info
	}
	if info.Version == "" {
		info.Version = bi.Main.Version
		if info.Version == "" {
			info.Version = "(devel)" // what Go itself says of an untagged main module
		}
	}
	if info.Commit == "" {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Commit = s.Value
			case "vcs.modified":
				info.Modified = s.Value == "true"
			}
		}
	}
	return info
}

// String is what `--version` prints after the program's name, one line
// to paste into a bug report:
//
//	v0.4.0-3-g1a2b3c4-dirty (commit 1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b, go1.26.0 linux/amd64)
func (i Info) String() string {
	var b strings.Builder
	b.WriteString(i.Version)
	b.WriteString(" (commit ")
	if i.Commit == "" {
		b.WriteString("unknown")
	} else {
		b.WriteString(i.Commit)
	}
	if i.Modified {
		b.WriteString(" modified")
	}
	fmt.Fprintf(&b, ", %s %s)", i.Go, i.Platform)
	return b.String()
}

package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"testing"
)

// runCLIFunc runs one command function the way run does (exit codes and
// the error line included) without needing it registered in commands().
func runCLIFunc(t *testing.T, f func(context.Context, []string, io.Reader, io.Writer, io.Writer) error, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := f(context.Background(), args, strings.NewReader(stdin), &out, &errOut)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0, out.String(), errOut.String()
	case errors.Is(err, errUsage):
		return 2, out.String(), errOut.String()
	}
	fmt.Fprintf(&errOut, "yardctl: %v\n", err)
	return 1, out.String(), errOut.String()
}

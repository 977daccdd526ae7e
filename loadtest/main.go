// Command loadtest is Switchyard's load generator and routing benchmark.
// The generator itself is tracked by its own issue; until it lands this
// binary says so instead of pretending to measure anything.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "loadtest: not implemented yet (see the loadtest issue)")
	os.Exit(2)
}

// Package drills holds Switchyard's fault drills: end-to-end tests that run
// a fleet on loopback as real processes — its own NATS (JetStream, file
// store) and Redis, simulated vLLM workers (`switchyard sim`, one process
// each), one kvtracker, two routers and two gateways — put a steady
// streaming load on it with the official OpenAI client, and inject faults
// with SIGKILL, SIGSTOP and SIGCONT or hostile requests.
//
// Each drill asserts what the clients see, how long the fleet takes to
// recover (against a bound), that no usage event is lost or duplicated
// (the usage stream read back and counted request id by request id
// against the ids the clients were given), and, for hostile input, that
// the services' memory comes back. Faults are real process deaths and
// freezes, not mocks: a drill exercises the reconnects, leases, retries
// and timeouts a deployment depends on.
//
// `go test ./drills` runs them (skipped with -short); `make drills` runs
// them with the long variants and writes drills/RESULTS.md, the table of
// measured recovery times the README shows.
package drills

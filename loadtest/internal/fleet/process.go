// Package fleet starts and stops the processes a comparison measures:
// simulated vLLM workers (`switchyard sim`) and the Switchyard stack in
// front of them (`switchyard dev --endpoints`, which runs an embedded NATS,
// the router and the gateway). They are separate processes, as in a
// deployment, and the load generator talks to them only over HTTP.
package fleet

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is a child process whose output goes to a log file and, line by
// line, to a scanner looking for what the caller waits for.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error
	logMu   sync.Mutex
	log     *os.File
}

// startProcess runs bin with args. scan sees every output line (stdout and
// stderr) until it returns true.
func startProcess(name, bin string, args []string, logDir string, scan func(line string) bool) (*process, error) {
	logPath := filepath.Join(logDir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, logPath: logPath, done: make(chan struct{}), log: f}
	p.cmd = exec.Command(bin, args...)
	p.cmd.SysProcAttr = sysProcAttr()
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	if err := p.cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	var scanMu sync.Mutex
	scanning := scan != nil
	var pipes sync.WaitGroup
	for _, r := range []io.Reader{stdout, stderr} {
		pipes.Go(func() {
			sc := bufio.NewScanner(r)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				line := sc.Text()
				p.logMu.Lock()
				_, _ = p.log.WriteString(line + "\n")
				p.logMu.Unlock()
				scanMu.Lock()
				if scanning && scan(line) {
					scanning = false
				}
				scanMu.Unlock()
			}
			// Keep draining so the child never blocks on a full pipe.
			_, _ = io.Copy(io.Discard, r)
		})
	}
	go func() {
		pipes.Wait()
		p.err = p.cmd.Wait()
		p.logMu.Lock()
		_ = p.log.Close()
		p.logMu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// exited reports an early exit as an error carrying the log's tail.
func (p *process) exited() error {
	return fmt.Errorf("%s exited (%v); last output:\n%s", p.name, p.err, tail(p.logPath, 15))
}

// stop asks the process to shut down (SIGTERM: the services drain and stop
// gracefully) and kills it if it has not within timeout.
func (p *process) stop(timeout time.Duration) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop %s: %w", p.name, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("stop %s: no exit %v after SIGTERM, killed", p.name, timeout)
	}
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitFor waits until found is closed, the process exits, or ctx ends.
func (p *process) waitFor(ctx context.Context, found <-chan struct{}, what string) error {
	select {
	case <-found:
		return nil
	case <-p.done:
		return p.exited()
	case <-ctx.Done():
		return fmt.Errorf("%s: waiting for %s: %w; last output:\n%s", p.name, what, ctx.Err(), tail(p.logPath, 15))
	}
}

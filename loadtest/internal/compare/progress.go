package compare

import (
	"io"
	"os"
	"sync"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/switchyard-dev/switchyard/loadtest/internal/results"
	"github.com/switchyard-dev/switchyard/loadtest/internal/runner"
)

// Progress shows a run's progress: a bar on a terminal, nothing otherwise
// (the caller prints a line when each run ends).
type Progress struct {
	mu  sync.Mutex
	bar *progressbar.ProgressBar
}

// NewProgress returns a bar counting requests (or, for a run bounded by
// duration alone, an open-ended counter) when w is a terminal and enabled.
func NewProgress(w io.Writer, enabled bool, label string, plan runner.Plan) *Progress {
	f, ok := w.(*os.File)
	if !enabled || !ok || !term.IsTerminal(int(f.Fd())) {
		return &Progress{}
	}
	total := int64(plan.Requests)
	if total == 0 {
		total = -1
	}
	return &Progress{bar: progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(label),
		progressbar.OptionShowCount(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100_000_000),
		progressbar.OptionClearOnFinish(),
	)}
}

// Done counts one finished request.
func (p *Progress) Done(*results.Record) {
	if p.bar == nil {
		return
	}
	p.mu.Lock()
	_ = p.bar.Add(1)
	p.mu.Unlock()
}

// Finish removes the bar.
func (p *Progress) Finish() {
	if p.bar == nil {
		return
	}
	p.mu.Lock()
	_ = p.bar.Finish()
	p.mu.Unlock()
}

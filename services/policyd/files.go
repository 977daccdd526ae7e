package policyd

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/internal/policy"
)

// fileSource reads a set of YAML files and directories and reloads them
// when their content changes. It polls rather than using inotify: a
// ConfigMap mount swaps a symlink, editors replace files, and polling sees
// all of it the same way.
type fileSource struct {
	paths    []string
	interval time.Duration
	log      zerolog.Logger
}

func newFileSource(cfg Config, log zerolog.Logger) (Source, error) {
	return &fileSource{paths: cfg.Paths, interval: cfg.PollInterval, log: log}, nil
}

// Run reads the files now and whenever they change until ctx ends; apply
// gets every distinct content, valid or not.
func (f *fileSource) Run(ctx context.Context, apply ApplyFunc) error {
	var last [sha256.Size]byte
	first := true
	t := time.NewTicker(f.interval)
	defer t.Stop()
	for {
		objs, diags, sum, err := f.read()
		switch {
		case err != nil:
			// A missing directory is reported like an invalid file: the
			// last good snapshot keeps serving.
			if first || sum != last {
				f.log.Warn().Err(err).Msg("read policy files")
				apply(nil, policy.Diagnostics{{Message: err.Error()}})
			}
		case first || sum != last:
			apply(objs, diags)
		}
		first, last = false, sum
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// read loads every file; sum covers names and contents, so any edit,
// addition or removal changes it.
func (f *fileSource) read() ([]*policy.Object, policy.Diagnostics, [sha256.Size]byte, error) {
	h := sha256.New()
	files, err := policy.ListYAML(f.paths...)
	if err != nil {
		fmt.Fprint(h, err.Error())
		var sum [sha256.Size]byte
		copy(sum[:], h.Sum(nil))
		return nil, nil, sum, err
	}
	var objs []*policy.Object
	var diags policy.Diagnostics
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			fmt.Fprint(h, err.Error())
			var sum [sha256.Size]byte
			copy(sum[:], h.Sum(nil))
			return nil, nil, sum, fmt.Errorf("read %s: %w", name, err)
		}
		fmt.Fprintf(h, "%s\x00%d\x00", name, len(data))
		h.Write(data)
		o, d := policy.ParseYAML(name, data)
		objs = append(objs, o...)
		diags = append(diags, d...)
	}
	var sum [sha256.Size]byte
	copy(sum[:], h.Sum(nil))
	return objs, diags, sum, nil
}

// Package telemetry builds the logger and the metrics plumbing every service
// shares.
package telemetry

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// LogConfig selects the log level and format.
type LogConfig struct {
	Level  string // debug, info, warn, error
	Format string // json or console
}

// NewLogger builds the process logger. It is called once, in main.
func NewLogger(cfg LogConfig, w io.Writer) (zerolog.Logger, error) {
	if w == nil {
		w = os.Stderr
	}
	lvl, err := zerolog.ParseLevel(strings.ToLower(cfg.Level))
	if err != nil || cfg.Level == "" {
		if cfg.Level != "" {
			return zerolog.Nop(), fmt.Errorf("log level %q: want debug, info, warn or error", cfg.Level)
		}
		lvl = zerolog.InfoLevel
	}
	switch cfg.Format {
	case "", "json":
	case "console":
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
	default:
		return zerolog.Nop(), fmt.Errorf("log format %q: want json or console", cfg.Format)
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}
